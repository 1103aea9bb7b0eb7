import { Inject, Injectable } from '@nestjs/common';
import type { GraphQLResolveInfo } from 'graphql';
import { fingerprintValue } from '../keys/fingerprint';
import { REPLAYED_HEADER } from '../idempotency.constants';
import { IdempotencyError } from '../errors/idempotency.errors';
import { IdempotencyProblemException } from '../errors/problem';
import { parseKeyHeader } from '../keys/idempotency-key';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { StoredResponse } from '../repository/idempotency.record';
import { replayedException, storedException } from '../response/stored-exception';
import { replayedBody, storedResult } from '../response/stored-response.codec';
import { ContextAdapter, InterceptedCall } from './context-adapter';
import { replayableOutput, storableOutput } from './graphql-output';
import { loadGraphql } from '../optional-peers';

/** A resolver's arguments: `(root, args, context, info)`. */
type ResolverArgs = [unknown, Record<string, unknown>, GraphqlContext | undefined, GraphQLResolveInfo];

/**
 * What the GraphQL context holds for an HTTP transport: the request (`req`; `request` under Apollo on Fastify), and
 * the response to mark a replay on (Express's `res`, Fastify's `reply` under Mercurius and Apollo).
 */
interface GraphqlContext {
  req?: any;
  request?: any;
  res?: { setHeader?(name: string, value: string): void };
  reply?: { header?(name: string, value: string): void; request?: any };
}

/**
 * GraphQL mutations (resolvers under `@nestjs/graphql`, Apollo or Mercurius): the key from the `Idempotency-Key` header
 * of the GraphQL request, an argument (`keyFrom: { arg }`) or the route's `key` function; the fingerprint over the
 * field and its arguments; the result replayed as the resolver's return value. Problems become `GraphQLError`s with
 * `extensions.code`.
 */
@Injectable()
export class GraphqlContextAdapter implements ContextAdapter {
  constructor(@Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions) {}

  operation({ context, route }: InterceptedCall): string {
    return route.name ?? `GraphQL ${field(context.getArgs() as ResolverArgs)}`;
  }

  key(call: InterceptedCall): unknown {
    const { context, route } = call;
    const [, args] = context.getArgs() as ResolverArgs;
    if (route.keyFrom) return route.keyFrom.arg.split('.').reduce<any>((value, name) => value?.[name], args);
    if (route.key) return route.key(args, context);
    const request = this.request(call) as { headers?: Record<string, string | string[] | undefined> } | undefined;
    return parseKeyHeader(request?.headers?.[this.options.keyHeader.toLowerCase()]);
  }

  missingKey({ route }: InterceptedCall): string {
    if (route.keyFrom) return `This mutation is idempotent; its argument ${route.keyFrom.arg} holds no key.`;
    if (route.key) return 'This mutation is idempotent; its key function found no key.';
    return `This operation is idempotent and requires an ${this.options.keyHeader} header.`;
  }

  request({ context }: InterceptedCall): unknown {
    const [, , graphqlContext] = context.getArgs() as ResolverArgs;
    return graphqlContext?.req ?? graphqlContext?.request ?? graphqlContext?.reply?.request;
  }

  input({ context }: InterceptedCall): unknown {
    return (context.getArgs() as ResolverArgs)[1];
  }

  async fingerprint({ context, route }: InterceptedCall, chosen?: string): Promise<string> {
    const resolverArgs = context.getArgs() as ResolverArgs;
    const args = chosen === undefined ? resolverArgs[1] : { $fingerprint: chosen };
    return fingerprintValue(['GraphQL', route.name ?? field(resolverArgs), args]);
  }

  /** The result read against the field's type, so that a replay is the same GraphQL answer (see graphql-output). */
  capture(value: unknown, { context }: InterceptedCall): StoredResponse {
    return storedResult(storableOutput(value, (context.getArgs() as ResolverArgs)[3]));
  }

  captureError(error: unknown): StoredResponse | undefined {
    return storedException(error);
  }

  replay(stored: StoredResponse, call: InterceptedCall): unknown {
    const [, , graphqlContext] = call.context.getArgs() as ResolverArgs;
    const request = this.request(call) as { res?: GraphqlContext['res'] } | undefined;
    const response = graphqlContext?.res ?? request?.res;
    if (response?.setHeader) response.setHeader(REPLAYED_HEADER, 'true');
    else graphqlContext?.reply?.header?.(REPLAYED_HEADER, 'true');
    if (stored.exception) throw replayedException(stored);
    return replayableOutput(replayedBody(stored), (call.context.getArgs() as ResolverArgs)[3]);
  }

  problem(error: IdempotencyError): Error {
    return graphqlError(IdempotencyProblemException.from(error));
  }
}

/** `Mutation.pay`: the parent type and the field. */
function field([, , , info]: ResolverArgs): string {
  return `${info.parentType.name}.${info.fieldName}`;
}

/**
 * A problem as a GraphQL error: `extensions.code` is `IDEMPOTENCY_` and the problem's name (`IDEMPOTENCY_IN_FLIGHT`),
 * next to the problem's `type`, `status` and, for a 409 in flight, `retryAfter` seconds.
 */
function graphqlError(problem: IdempotencyProblemException): Error {
  const { GraphQLError } = loadGraphql();
  const { type, status, detail, title: _title, ...extra } = problem.problem;
  const code = `IDEMPOTENCY_${type.split(':').pop()!.toUpperCase().replace(/-/g, '_')}`;
  const retryAfter = problem.headers['Retry-After'];
  return new GraphQLError(detail, {
    extensions: { code, type, status, ...extra, ...(retryAfter ? { retryAfter: Number(retryAfter) } : {}) },
    originalError: problem,
  });
}
