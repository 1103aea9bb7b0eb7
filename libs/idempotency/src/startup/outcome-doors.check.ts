import { RequestMethod } from '@nestjs/common';
import { OutcomeDoors } from '../contexts/outcome-door.interceptor';
import { readDoor } from '../decorators/idempotent-outcome.decorator';
import { METHOD_METADATA } from '../nest-internals';
import { ResolvedIdempotencyOptions } from '../options/resolved-options';
import { OperationNames } from './operation-names';

/** A handler that carries `@IdempotentOutcome()`, as the startup scan found it. */
export interface FoundDoor {
  handler: Function;
  where: string;
  door: NonNullable<ReturnType<typeof readDoor>>;
}

/**
 * Checks each outcome door at startup and registers it (`OutcomeDoors`): it is a GET route; the operation it names is
 * one protected HTTP route of the application; and that operation is scoped (each caller reads its own keys' outcomes
 * only), unless the door says its outcomes are not private. The problems, each naming the door.
 */
export function checkOutcomeDoors(
  found: FoundDoor[],
  operations: OperationNames,
  options: Pick<ResolvedIdempotencyOptions, 'scope'>,
  doors: OutcomeDoors,
): string[] {
  return found.flatMap(({ handler, where, door }) => {
    const { operation } = door;
    const named = `${where}: @IdempotentOutcome(${JSON.stringify(operation)})`;
    if (Reflect.getMetadata(METHOD_METADATA, handler) !== RequestMethod.GET) {
      return [`${named} answers GET requests: put it on a @Get() handler`];
    }
    const route = operations.httpRoute(operation);
    if (!route) {
      const known = operations.httpRoutes().map((name) => JSON.stringify(name));
      return [
        `${named}: no protected HTTP route is named so (the route as 'POST /orders', or its name); the application has ${known.join(', ') || 'none'}`,
      ];
    }
    const scope = route.scope ?? options.scope;
    if (door.options.private && !scope) {
      return [
        `${named}: the operation has no scope, so any caller who sends a key would read that key's outcome. Scope the ` +
          'operation (scope), or say its outcomes are not private (keys unique by construction): { private: false }',
      ];
    }
    // The key comes from the key header, always: the operation's own `key` function reads the request it protects.
    doors.add(handler, {
      operation,
      route: { ...route, key: undefined, required: true },
      maxWaitSeconds: door.options.maxWaitSeconds,
    });
    return [];
  });
}
