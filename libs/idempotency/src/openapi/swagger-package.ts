import { PROBLEM_SCHEMA_NAME, PROBLEM_TYPE_URIS } from './problem-schema';

/** What the module uses of `@nestjs/swagger`: the shared problem model, and `$ref`s to it. */
export interface OpenApiPackage {
  /** The `IdempotencyProblem` model class (one per process), for `components.schemas`. */
  problemModel(): Function;
  schemaPath(name: string): string;
}

let loaded: OpenApiPackage | null | undefined;

/**
 * `@nestjs/swagger` if the application has it (an optional peer: 11 for NestJS 11, 12 for NestJS 12), else undefined;
 * looked for once. An application without it never loads it.
 */
export function loadSwagger(): OpenApiPackage | undefined {
  if (loaded === undefined) loaded = load();
  return loaded ?? undefined;
}

function load(): OpenApiPackage | null {
  let swagger: typeof import('@nestjs/swagger');
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- an optional peer, loaded only when installed
    swagger = require('@nestjs/swagger') as typeof import('@nestjs/swagger');
  } catch {
    return null;
  }
  const { ApiProperty, ApiPropertyOptional, getSchemaPath } = swagger;
  /** An RFC 9457 problem, as the module answers every protocol error. */
  class IdempotencyProblem {}
  Object.defineProperty(IdempotencyProblem, 'name', { value: PROBLEM_SCHEMA_NAME });
  const property = (name: string, decorator: PropertyDecorator) => decorator(IdempotencyProblem.prototype, name);
  property(
    'type',
    ApiProperty({
      type: String,
      enum: PROBLEM_TYPE_URIS,
      description: 'The problem type: a stable URI per outcome (ProblemType in the package)',
    }),
  );
  property('title', ApiProperty({ type: String, description: 'A short summary of the problem type' }));
  property('status', ApiProperty({ type: 'integer', description: 'The HTTP status' }));
  property('detail', ApiProperty({ type: String, description: 'What happened to this request' }));
  property(
    'writeIndex',
    ApiPropertyOptional({
      type: 'integer',
      description: 'commit-rejected: which commitWith write failed its condition',
    }),
  );
  return { problemModel: () => IdempotencyProblem, schemaPath: (name) => getSchemaPath(name) };
}
