import { Inject, Injectable, RequestMethod } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { MAX_KEY_LENGTH, REPLAYED_HEADER } from '../idempotency.constants';
import { HTTP_CODE_METADATA, METHOD_METADATA } from '../nest-internals';
import { IdempotentOptions } from '../options/idempotency.options';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { callPolicy, idempotentOptionsOf } from '../options/route-settings';
import { PROBLEM_SCHEMA_NAME } from './problem-schema';
import { loadSwagger, OpenApiPackage } from './swagger-package';
import { readDoor } from '../decorators/idempotent-outcome.decorator';

type DoorMetadata = NonNullable<ReturnType<typeof readDoor>>;

/** `@nestjs/swagger`'s metadata keys (its `DECORATORS`), as its explorer reads them. */
const API_PARAMETERS = 'swagger/apiParameters';
const API_RESPONSE = 'swagger/apiResponse';
const API_EXTENSION = 'swagger/apiExtension';
const API_EXTRA_MODELS = 'swagger/apiExtraModels';
const API_HEADERS = 'swagger/apiHeaders';
const DESCRIBED = [API_PARAMETERS, API_RESPONSE, API_EXTENSION] as const;

/** The problems every protected route may answer, by status, with the outcomes behind each. */
const ROUTE_PROBLEMS: Record<number, { description: string; retryAfter?: true }> = {
  400: { description: 'The idempotency key is missing or malformed (key-missing, key-invalid).' },
  409: {
    description: 'A request with this key is still in progress (in-flight): retry after Retry-After seconds.',
    retryAfter: true,
  },
  422: { description: 'This key was already used with a different request (fingerprint-mismatch).' },
  503: {
    description:
      'The idempotency store is throttled or unavailable; the request was not processed. Retry with the same key.',
    retryAfter: true,
  },
};

/** What the module added to a handler's metadata, so that a second application in the process replaces it. */
const originals = new WeakMap<
  Function,
  { parameters?: unknown[]; responses?: Record<string, object>; extension?: object }
>();

/**
 * Documents every `@Idempotent()` HTTP route in the OpenAPI document `@nestjs/swagger` builds, with no code in the
 * application: the key header, the problem responses (`application/problem+json`, one shared schema), the
 * `Idempotent-Replayed` header on its success responses and an `x-idempotency` extension with its policy. Runs when the
 * module is created, before `SwaggerModule.createDocument()` can be called, and only if `@nestjs/swagger` is installed;
 * an application without it never loads it. A response the route declares itself is kept as it is.
 */
@Injectable()
export class OpenApiRoutes {
  constructor(
    discovery: DiscoveryService,
    scanner: MetadataScanner,
    reflector: Reflector,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {
    const swagger = loadSwagger();
    if (!swagger) return;
    for (const { metatype, inject } of discovery.getControllers()) {
      if (typeof metatype !== 'function' || inject) continue;
      const prototype = metatype.prototype as Record<string, Function>;
      for (const name of scanner.getAllMethodNames(prototype)) {
        const inherited = prototype[name];
        if (Reflect.getMetadata(METHOD_METADATA, inherited) === undefined) continue;
        const door = readDoor(inherited);
        if (door) this.describeDoor(swagger, metatype, ownHandler(metatype, name, inherited), door);
        const route = idempotentOptionsOf(reflector, inherited, metatype);
        if (!route) continue;
        this.describe(swagger, metatype, ownHandler(metatype, name, inherited), route);
      }
    }
  }

  private describe(swagger: OpenApiPackage, type: Function, handler: Function, route: IdempotentOptions): void {
    let original = originals.get(handler);
    if (!original) {
      original = {
        parameters: Reflect.getMetadata(API_PARAMETERS, handler),
        responses: Reflect.getMetadata(API_RESPONSE, handler),
        extension: Reflect.getMetadata(API_EXTENSION, handler),
      };
      originals.set(handler, original);
    }
    const policy = callPolicy(route, this.options);
    const scope = route.scope ?? this.options.scope;
    const scoped = scope !== undefined && scope !== false;
    const parameters = [...(original.parameters ?? [])];
    if (!route.key && !this.declaresKeyHeader(type, parameters))
      parameters.push(this.keyParameter(route, policy, scoped));
    Reflect.defineMetadata(API_PARAMETERS, parameters, handler);
    // A response the controller class declares (`@ApiResponse` on the class) is the route's own too: kept.
    const declared = { ...Reflect.getMetadata(API_RESPONSE, type), ...original.responses };
    Reflect.defineMetadata(API_RESPONSE, this.responses(swagger, handler, declared), handler);
    Reflect.defineMetadata(
      API_EXTENSION,
      {
        ...original.extension,
        'x-idempotency': {
          key: route.key
            ? 'derived from the request'
            : { header: this.options.keyHeader, required: route.required !== false },
          ttlSeconds: policy.ttlSeconds,
          leaseSeconds: policy.leaseSeconds,
          mode: policy.mode,
          scopedPerCaller: scoped,
        },
      },
      handler,
    );
    const models: unknown[] = Reflect.getMetadata(API_EXTRA_MODELS, type) ?? [];
    const problem = swagger.problemModel();
    if (!models.includes(problem)) Reflect.defineMetadata(API_EXTRA_MODELS, [...models, problem], type);
  }

  /**
   * An outcome door (`@IdempotentOutcome()`): the key header, `Prefer: wait`, and its answers: the operation's stored
   * answer (any status it stored, `Idempotent-Replayed: true`), 404, 409 and the key problems; `x-idempotency-outcome`
   * names the operation, which a client's `outcomes` maps to this path.
   */
  private describeDoor(swagger: OpenApiPackage, type: Function, handler: Function, door: DoorMetadata): void {
    const problem = (description: string) => ({
      description,
      content: { 'application/problem+json': { schema: { $ref: swagger.schemaPath(PROBLEM_SCHEMA_NAME) } } },
    });
    Reflect.defineMetadata(
      API_PARAMETERS,
      [
        {
          in: 'header',
          name: this.options.keyHeader,
          required: true,
          description: `The key the request to ${door.operation} was sent with; its outcome is read for this caller only.`,
          schema: { type: 'string', minLength: 1, maxLength: MAX_KEY_LENGTH },
        },
        {
          in: 'header',
          name: 'Prefer',
          required: false,
          description: `wait=N (RFC 7240): while it runs, wait up to N seconds (at most ${door.options.maxWaitSeconds}) for its answer.`,
          schema: { type: 'string', example: 'wait=10' },
        },
      ],
      handler,
    );
    Reflect.defineMetadata(
      API_RESPONSE,
      {
        default: {
          description: `The answer ${door.operation} stored for this key, with its own status, headers and body (${REPLAYED_HEADER}: true).`,
        },
        400: problem('The key is missing or malformed (key-missing, key-invalid).'),
        404: problem(
          'No outcome for this key and caller, or it was released: send the request again (outcome-not-found).',
        ),
        409: problem('It is still running (in-flight): ask again after Retry-After, or send Prefer: wait=N.'),
      },
      handler,
    );
    Reflect.defineMetadata(
      API_EXTENSION,
      { 'x-idempotency-outcome': { operation: door.operation, maxWaitSeconds: door.options.maxWaitSeconds } },
      handler,
    );
    const models: unknown[] = Reflect.getMetadata(API_EXTRA_MODELS, type) ?? [];
    if (!models.includes(swagger.problemModel())) {
      Reflect.defineMetadata(API_EXTRA_MODELS, [...models, swagger.problemModel()], type);
    }
  }

  /** Whether the route or its class declares the key header itself, in any letter case (header names have none). */
  private declaresKeyHeader(type: Function, parameters: unknown[]): boolean {
    const name = this.options.keyHeader.toLowerCase();
    const headers: unknown[] = [...parameters, ...(Reflect.getMetadata(API_HEADERS, type) ?? [])];
    return headers.some((entry) => {
      const header = entry as { in?: unknown; name?: unknown };
      return header.in === 'header' && typeof header.name === 'string' && header.name.toLowerCase() === name;
    });
  }

  private keyParameter(route: IdempotentOptions, policy: ReturnType<typeof callPolicy>, scoped: boolean) {
    return {
      in: 'header',
      name: this.options.keyHeader,
      required: route.required !== false,
      description:
        `A key the client makes unique per operation (1–${MAX_KEY_LENGTH} characters), sent again with every retry. ` +
        `The first request with a key runs the operation; a retry with the same key and request gets the stored ` +
        `response (${REPLAYED_HEADER}: true) for ${policy.ttlSeconds} s after it completed; the same key with a ` +
        `different request is a 422. While the first request runs (a lease of ${policy.leaseSeconds} s, renewed while ` +
        `it works), a retry gets 409 with Retry-After. Keys are ${scoped ? 'scoped per caller' : 'shared by every caller'}.` +
        (route.required === false ? ' Without a key the request runs unprotected.' : ''),
      schema: { type: 'string', minLength: 1, maxLength: MAX_KEY_LENGTH },
    };
  }

  /** The route's own responses, its success ones with `Idempotent-Replayed`, and the problems it does not declare. */
  private responses(swagger: OpenApiPackage, handler: Function, declared: Record<string, object>) {
    const responses: Record<string, object> = { ...declared };
    const replayed = {
      [REPLAYED_HEADER]: {
        description: 'true when this is the stored response of an earlier request with the same key',
        schema: { type: 'string', enum: ['true'] },
      },
    };
    const successes = Object.keys(responses).filter((status) => /^2\d\d$/.test(status));
    if (successes.length === 0) {
      responses[String(successStatus(handler))] = { description: '' };
      successes.push(String(successStatus(handler)));
    }
    for (const status of successes) {
      const response = responses[status] as { headers?: object };
      responses[status] = { ...response, headers: { ...response.headers, ...replayed } };
    }
    for (const [status, { description, retryAfter }] of Object.entries(ROUTE_PROBLEMS)) {
      if (responses[status]) continue;
      responses[status] = {
        description,
        content: { 'application/problem+json': { schema: { $ref: swagger.schemaPath(PROBLEM_SCHEMA_NAME) } } },
        ...(retryAfter && {
          headers: {
            'Retry-After': {
              description: 'Seconds to wait before retrying with the same key',
              schema: { type: 'integer' },
            },
          },
        }),
      };
    }
    return responses;
  }
}

/**
 * The handler to describe for one controller: its own. A handler inherited from a base class (`abstract class
 * CrudController { @Post() create() }`) is shared by every subclass, and `@nestjs/swagger` reads a route's description
 * from the handler; so the subclass gets a method of its own that calls the inherited one, with the inherited
 * metadata (as declared, before this module described it for another controller). Nest routes it the same way.
 */
function ownHandler(type: Function, name: string, inherited: Function): Function {
  const prototype = type.prototype as Record<string, Function>;
  if (Object.prototype.hasOwnProperty.call(prototype, name)) return inherited;
  const own = {
    [name](this: unknown, ...args: unknown[]): unknown {
      return inherited.apply(this, args);
    },
  }[name];
  for (const key of Reflect.getMetadataKeys(inherited)) {
    Reflect.defineMetadata(key, Reflect.getMetadata(key, inherited), own);
  }
  const original = originals.get(inherited);
  if (original) {
    const values = [original.parameters, original.responses, original.extension];
    DESCRIBED.forEach((key, i) =>
      values[i] === undefined ? Reflect.deleteMetadata(key, own) : Reflect.defineMetadata(key, values[i], own),
    );
  }
  Object.defineProperty(prototype, name, { value: own, writable: true, configurable: true, enumerable: false });
  return own;
}

/** The status Nest answers a route with: `@HttpCode()`, else 201 for a POST and 200 otherwise. */
function successStatus(handler: Function): number {
  const code: number | undefined = Reflect.getMetadata(HTTP_CODE_METADATA, handler);
  if (code) return code;
  return Reflect.getMetadata(METHOD_METADATA, handler) === RequestMethod.POST ? 201 : 200;
}
