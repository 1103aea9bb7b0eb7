import { CallHandler, ExecutionContext, Inject, Injectable, NestInterceptor } from '@nestjs/common';
import { from, Observable } from 'rxjs';
import {
  IdempotencyError,
  IdempotencyInFlightError,
  IdempotencyKeyPoisonedError,
  IdempotencyOutcomeNotFoundError,
} from '../errors/idempotency.errors';
import { StepOutcomeUnknownError } from '../errors/step-errors';
import { IdempotentOptions } from '../options/idempotency.options';
import { IdempotencyClock } from '../idempotency.clock';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { OutcomeLookup } from '../protocol/outcome-lookup';
import { IdempotencyRepository } from '../repository/idempotency.repository';
import { CallDescriber } from './call-describer';
import { HttpContextAdapter } from './http.context';

/** An outcome door as startup found it: the operation it answers for, that operation's options, its own options. */
export interface OutcomeDoor {
  operation: string;
  /** The operation's route options (its scope and partition), with its key read from the key header only. */
  route: IdempotentOptions;
  maxWaitSeconds: number;
}

/** The outcome doors of the application, by handler, as the startup check found them (`IdempotentRoutesCheck`). */
@Injectable()
export class OutcomeDoors {
  private readonly doors = new Map<Function, OutcomeDoor>();

  add(handler: Function, door: OutcomeDoor): void {
    this.doors.set(handler, door);
  }

  of(handler: Function): OutcomeDoor | undefined {
    return this.doors.get(handler);
  }
}

/**
 * Answers an `@IdempotentOutcome()` handler (docs/outcomes-by-key.md): the request's key is located as the operation
 * locates it (its scope, its partition), the record read (with `Prefer: wait=N`, until it settles or the wait is over),
 * and its stored answer replayed as a duplicate gets it, or a problem: 404 outcome-not-found, 409 in-flight, 500
 * key-poisoned, or 500 step-outcome-unknown. The handler never runs.
 */
@Injectable()
export class OutcomeDoorInterceptor implements NestInterceptor {
  private readonly outcomes: OutcomeLookup;

  constructor(
    repository: IdempotencyRepository,
    clock: IdempotencyClock,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) options: ResolvedIdempotencyOptions,
    private readonly describer: CallDescriber,
    private readonly http: HttpContextAdapter,
    private readonly doors: OutcomeDoors,
  ) {
    this.outcomes = new OutcomeLookup(repository, clock, options);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const door = this.doors.of(context.getHandler());
    if (!door || context.getType() !== 'http') return next.handle();
    return from(this.answer(context, door));
  }

  private async answer(context: ExecutionContext, door: OutcomeDoor): Promise<unknown> {
    const call = { context, route: door.route };
    try {
      const location = this.describer.locate(call, this.http, door.operation)!;
      const waitSeconds = preferredWait(this.http.requestHeader(context, 'prefer'), door.maxWaitSeconds);
      if (waitSeconds !== undefined) this.http.setHeader(context, 'preference-applied', `wait=${waitSeconds}`);
      const outcome = await this.outcomes.at(location, (waitSeconds ?? 0) * 1000);
      if (outcome.state === 'completed') return this.http.replay(outcome.response, call);
      if (outcome.state === 'in-flight') throw new IdempotencyInFlightError(outcome.retryAfterSeconds);
      if (outcome.state === 'poisoned') throw new IdempotencyKeyPoisonedError(outcome.owners);
      if (outcome.state === 'step-outcome-unknown') throw new StepOutcomeUnknownError(outcome.step, outcome.attempt);
      throw new IdempotencyOutcomeNotFoundError(outcome.state);
    } catch (error) {
      if (error instanceof IdempotencyError) throw this.http.problem(error);
      throw error;
    }
  }
}

/**
 * The wait a `Prefer` header asks for (RFC 7240 `wait=N`, in seconds), bounded by `max`; undefined when it asks none.
 * Several preferences, in one header or several, are read; the first `wait` counts.
 */
export function preferredWait(prefer: unknown, max: number): number | undefined {
  const text = [prefer]
    .flat()
    .filter((value) => typeof value === 'string')
    .join(',');
  const match = /(?:^|[,;\s])wait\s*=\s*"?(\d+)"?/i.exec(text);
  return match ? Math.min(Number(match[1]), max) : undefined;
}
