import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BadGatewayException, Body, Controller, Headers, Injectable, Post, Res } from '@nestjs/common';
import { Idempotent, IdempotencyModule, InMemoryIdempotencyRepository, ProblemType } from 'nestjs-dynamodb-idempotency';
import { Platform, startApp, TestApp } from '../support/app';
import { testClock } from '../support/clock';
import { INVARIANTS, InvariantId } from './invariants';

/**
 * The simulation one layer up: two Nest applications (Express and Fastify) over one store, driven over real HTTP, so
 * what the HTTP adapter adds is simulated too: a response the handler sent itself (`@Res({ passthrough: true })`),
 * headers a run set, the problem answers. The service-level fleet (./fleet.ts) simulates time, crashes and operators;
 * this one, the routes' ways of answering.
 */

/** The routes: how each one answers. */
export const ROUTES = ['returned', 'sent', 'optimistic'] as const;
export type Route = (typeof ROUTES)[number];

/** A handler's run, waiting for the simulation to finish it. */
export interface HttpRun {
  id: number;
  route: Route;
  key: string;
  request: number;
  state: 'running' | 'succeeded' | 'failed';
  finish(outcome: 'ok' | 'fail'): void;
}

/** The handlers' side of the fleet, one for both apps: every run in the order they started, and invariant 1. */
@Injectable()
export class HttpRuns {
  readonly all: HttpRun[] = [];
  readonly violations: string[] = [];

  async start(route: Route, key: string, request: string | undefined): Promise<number> {
    let finish: (outcome: 'ok' | 'fail') => void = () => undefined;
    const done = new Promise<'ok' | 'fail'>((resolve) => (finish = resolve));
    const run: HttpRun = {
      id: this.all.length + 1,
      route,
      key,
      request: Number(request),
      state: 'running',
      finish: (outcome) => {
        run.state = outcome === 'ok' ? 'succeeded' : 'failed';
        finish(outcome);
      },
    };
    // Invariant 1 on lease-mode routes, as the run starts: no other run of the key runs, none has succeeded.
    const holder = this.all.find((other) => other.route === route && other.key === key && other.state !== 'failed');
    if (route !== 'optimistic' && holder) {
      this.violations.push(
        `${INVARIANTS['one-execution']} — violated: ${route} run ${run.id} started while run ${holder.id} was ${holder.state}`,
      );
    }
    this.all.push(run);
    // A provider's 502: not final, so the key is released and the client may retry.
    if ((await done) === 'fail') throw new BadGatewayException(`run ${run.id} failed`);
    return run.id;
  }
}

/** What a Fastify reply and an Express response share, as the handlers use them. */
interface Reply {
  header(name: string, value: string): unknown;
  status?(code: number): Reply;
  code?(code: number): Reply;
  send(body: unknown): unknown;
}

@Controller('sim')
class SimulatedController {
  constructor(private readonly runs: HttpRuns) {}

  /**
   * A run that returns its answer, after setting two headers of its own: `x-run` is replayed (`replayHeaders`),
   * `x-order-id` is not.
   */
  private async returnedBy(route: Route, reply: Reply, key: string, request: string, variant: number) {
    const next = this.runs.all.length + 1;
    reply.header('x-run', String(next));
    reply.header('x-order-id', `ord_${next}`);
    const run = await this.runs.start(route, key, request);
    return { run, variant };
  }

  /** Returns its answer (lease mode). */
  @Post('returned')
  @Idempotent()
  async returned(
    @Body() body: { variant: number },
    @Headers('idempotency-key') key: string,
    @Headers('x-request') request: string,
    @Res({ passthrough: true }) reply: Reply,
  ) {
    return this.returnedBy('returned', reply, key, request, body.variant);
  }

  /** The Express habit: sends the answer itself and returns nothing. */
  @Post('sent')
  @Idempotent()
  async sent(
    @Body() body: { variant: number },
    @Headers('idempotency-key') key: string,
    @Headers('x-request') request: string,
    @Res({ passthrough: true }) reply: Reply,
  ) {
    const run = await this.runs.start('sent', key, request);
    (reply.code ?? reply.status)!.call(reply, 201).send({ run, variant: body.variant });
  }

  /** Optimistic mode: duplicates run too, one write wins; the losers' headers must not go out with the winner's body. */
  @Post('optimistic')
  @Idempotent({ mode: 'optimistic' })
  async optimistic(
    @Body() body: { variant: number },
    @Headers('idempotency-key') key: string,
    @Headers('x-request') request: string,
    @Res({ passthrough: true }) reply: Reply,
  ) {
    return this.returnedBy('optimistic', reply, key, request, body.variant);
  }
}

/** One request: what the client was answered, once it was. */
export interface HttpRequest {
  id: number;
  app: number;
  route: Route;
  key: string;
  variant: number;
  /** The status, the body, and the headers a run sets (null: absent). */
  answer?: { status: number; body: unknown; run: string | null; orderId: string | null };
  checked: boolean;
}

/** The HTTP fleet's applications, started once for every sequence (each sequence uses keys of its own). */
export class HttpApps {
  private constructor(
    readonly apps: TestApp[],
    readonly runs: HttpRuns,
  ) {}

  static async start(): Promise<HttpApps> {
    const runs = new HttpRuns();
    const clock = testClock();
    const repository = new InMemoryIdempotencyRepository(clock);
    const unreachable = new DynamoDBClient({ endpoint: 'http://127.0.0.1:9', region: 'us-east-1' });
    // One process keeps a replay cache, the other does not: every duplicate there reaches the store.
    const app = (platform: Platform, cached: boolean) =>
      startApp(
        platform,
        {
          imports: [
            IdempotencyModule.forRoot({
              client: unreachable,
              tableName: 'unused',
              repository,
              replayHeaders: ['content-type', 'x-run'],
              replayCache: { enabled: cached },
            }),
          ],
          controllers: [SimulatedController],
          providers: [{ provide: HttpRuns, useValue: runs }],
        },
        { clock },
      );
    return new HttpApps([await app('express', true), await app('fastify', false)], runs);
  }

  close(): Promise<unknown> {
    return Promise.all(this.apps.map((app) => app.close()));
  }
}

/** The runs of one sequence, and the checks of the invariants after every step. */
export class HttpFleet {
  readonly requests: HttpRequest[] = [];
  readonly violations: string[] = [];
  private readonly answers = new Map<string, string>();
  private readonly firstRun: number;
  private readonly firstViolation: number;
  private static sequences = 0;
  private readonly prefix = `http-${++HttpFleet.sequences}-${Date.now()}`;

  constructor(readonly apps: HttpApps) {
    this.firstRun = apps.runs.all.length;
    this.firstViolation = apps.runs.violations.length;
  }

  /** This sequence's runs. */
  runs(): HttpRun[] {
    return this.apps.runs.all.slice(this.firstRun);
  }

  keyOf(key: number): string {
    return `${this.prefix}-${key}`;
  }

  send(app: number, route: Route, key: number, variant: number): void {
    const request: HttpRequest = {
      id: this.requests.length + 1,
      app,
      route,
      key: this.keyOf(key),
      variant,
      checked: false,
    };
    this.requests.push(request);
    void fetch(`${this.apps.apps[app].url}/sim/${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': request.key, 'x-request': String(request.id) },
      body: JSON.stringify({ variant }),
    }).then(async (response) => {
      const text = await response.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // kept as text: an empty or non-JSON body is itself a finding
      }
      const { headers } = response;
      request.answer = { status: response.status, body, run: headers.get('x-run'), orderId: headers.get('x-order-id') };
    });
  }

  /** Waits until every request has its answer or its run is waiting to be finished, and the store is quiet. */
  async settle(): Promise<void> {
    const waiting = (request: HttpRequest) =>
      this.runs().some((run) => run.request === request.id && run.state === 'running' && run.key === request.key);
    for (let quiet = 0, tries = 0; quiet < 3; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 3));
      const done = this.requests.every((request) => request.answer !== undefined || waiting(request));
      quiet = done ? quiet + 1 : 0;
      if (tries > 1000) {
        this.violations.push(`the fleet did not settle: ${JSON.stringify(this.requests.filter((r) => !r.answer))}`);
        return;
      }
    }
  }

  /** After each step: the runs' own check (invariant 1), then every answer given since the last step (invariant 2). */
  check(): string[] {
    for (const request of this.requests) {
      if (request.answer === undefined || request.checked) continue;
      request.checked = true;
      this.checkAnswer(request, request.answer);
    }
    return [...this.apps.runs.violations.slice(this.firstViolation), ...this.violations];
  }

  /** Invariant 2: every 2xx answer for a key is the stored one, its headers included; errors are documented ones. */
  private checkAnswer(request: HttpRequest, answer: NonNullable<HttpRequest['answer']>): void {
    const where = `request ${request.id} (${request.route}, app ${request.app}, key …${request.key.slice(-2)})`;
    if (answer.status >= 200 && answer.status < 300) {
      const run = (answer.body as { run?: number } | undefined)?.run;
      if (typeof run !== 'number') {
        this.violate('one-answer', `${where} was answered ${answer.status} with ${JSON.stringify(answer.body)}`);
        return;
      }
      if (answer.run !== null && answer.run !== String(run)) {
        this.violate('one-answer', `${where} got run ${run}'s body with run ${answer.run}'s x-run header`);
      }
      if (answer.orderId !== null && answer.orderId !== `ord_${run}`) {
        this.violate(
          'one-answer',
          `${where} got run ${run}'s body with the x-order-id ${answer.orderId} of another run`,
        );
      }
      const answerKey = `${request.route} ${request.key}`;
      const stored = this.answers.get(answerKey) ?? JSON.stringify(answer.body);
      this.answers.set(answerKey, stored);
      if (JSON.stringify(answer.body) !== stored) {
        this.violate('one-answer', `${where} got ${JSON.stringify(answer.body)}; the key answered ${stored} before`);
      }
      return;
    }
    const type = (answer.body as { type?: string } | undefined)?.type;
    if (answer.status === 502) {
      const stored = this.answers.get(`${request.route} ${request.key}`);
      const sameBody = stored !== undefined && (JSON.parse(stored) as { variant: number }).variant === request.variant;
      if (request.route === 'optimistic' && sameBody) {
        this.violate('one-answer', `${where} got its run's 502, but the key had completed with ${stored}`);
      }
      return;
    }
    if (!(Object.values(ProblemType) as string[]).includes(type ?? '')) {
      this.violate('one-answer', `${where} was answered ${answer.status} ${JSON.stringify(answer.body)}`);
    }
  }

  violate(id: InvariantId, detail: string): void {
    this.violations.push(`${INVARIANTS[id]} — violated: ${detail}`);
  }
}
