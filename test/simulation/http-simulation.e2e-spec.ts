import fc from 'fast-check';
import { HttpApps, HttpFleet, Route, ROUTES } from './http-fleet';

/**
 * The simulation over HTTP: random sequences of requests to two apps (Express with a replay cache, Fastify without)
 * over one store, on routes that answer in each way a handler can (a returned value with a header of its run, a
 * response the handler sent itself, optimistic mode), and runs finishing or failing in any order. After every step the
 * invariants of docs/invariants.md that the HTTP adapter can break are checked: one execution per key, one answer per
 * key (body and headers). Replay a failure with `SIMULATION_SEED=… SIMULATION_PATH=… npx jest test/simulation/http`.
 */
const runs = Number(process.env.SIMULATION_HTTP_RUNS ?? 60);
const seed = process.env.SIMULATION_SEED === undefined ? undefined : Number(process.env.SIMULATION_SEED);
const path = process.env.SIMULATION_PATH;

abstract class HttpStep implements fc.AsyncCommand<object, HttpFleet> {
  check(): boolean {
    return true;
  }
  async run(_model: object, fleet: HttpFleet): Promise<void> {
    this.act(fleet);
    await fleet.settle();
    const violations = fleet.check();
    if (violations.length > 0) throw new Error(violations.join('\n'));
  }
  protected abstract act(fleet: HttpFleet): void;
  abstract toString(): string;
}

/** A client sends a request for `key` (`variant` is its body: 0 and 1 differ) to an app. */
class Send extends HttpStep {
  constructor(
    readonly app: number,
    readonly route: Route,
    readonly key: number,
    readonly variant: number,
  ) {
    super();
  }
  act(fleet: HttpFleet) {
    fleet.send(this.app, this.route, this.key, this.variant);
  }
  toString() {
    return `send(app ${this.app}, ${this.route}, key ${this.key}, body ${this.variant})`;
  }
}

/** A running handler (the `pick`-th) returns, or fails with a provider's 502. */
class Finish extends HttpStep {
  constructor(
    readonly pick: number,
    readonly outcome: 'ok' | 'fail',
  ) {
    super();
  }
  act(fleet: HttpFleet) {
    const running = fleet.runs().filter((run) => run.state === 'running');
    if (running.length > 0) running[this.pick % running.length].finish(this.outcome);
  }
  toString() {
    return `finish(run #${this.pick}, ${this.outcome})`;
  }
}

const steps = [
  fc
    .tuple(
      fc.integer({ min: 0, max: 1 }),
      fc.constantFrom(...ROUTES),
      fc.integer({ min: 0, max: 1 }),
      fc.oneof({ arbitrary: fc.constant(0), weight: 4 }, fc.constant(1)),
    )
    .map(([app, route, key, variant]) => new Send(app, route, key, variant)),
  fc
    .tuple(fc.nat(5), fc.constantFrom<'ok' | 'fail'>('ok', 'ok', 'fail'))
    .map(([pick, outcome]) => new Finish(pick, outcome)),
];

/** Runs a sequence, then finishes every run still waiting (so no request is left open), checking after each. */
async function simulate(apps: HttpApps, sequence: Iterable<fc.AsyncCommand<object, HttpFleet>>): Promise<void> {
  const fleet = new HttpFleet(apps);
  try {
    await fc.asyncModelRun(() => ({ model: {}, real: fleet }), sequence);
  } finally {
    for (const run of fleet.runs()) if (run.state === 'running') run.finish('ok');
    await fleet.settle();
  }
  const violations = fleet.check();
  if (violations.length > 0) throw new Error(violations.join('\n'));
}

describe('the protocol simulation over HTTP (Express and Fastify apps over one store)', () => {
  let apps: HttpApps;
  beforeAll(async () => {
    apps = await HttpApps.start();
  });
  afterAll(() => apps.close());

  it(`keeps one execution and one answer per key over ${runs} random sequences of up to 20 steps`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.commands(steps, { maxCommands: 20, size: 'max' }), (sequence) => simulate(apps, sequence)),
      { numRuns: runs, seed, path, verbose: 1 },
    );
  }, 300_000);

  // The sequences the simulation finds for issue 42's HTTP bugs, kept so that they are tried on every run.
  it.each([
    [
      '§4 a response the handler sent itself is never replayed empty',
      [new Send(0, 'sent', 0, 0), new Finish(0, 'ok'), new Send(1, 'sent', 0, 0)],
    ],
    [
      '§3 optimistic mode: a losing run’s own headers do not go out with the winner’s body',
      [new Send(0, 'optimistic', 0, 0), new Send(1, 'optimistic', 0, 0), new Finish(0, 'ok'), new Finish(0, 'ok')],
    ],
    [
      '§3 optimistic mode: a duplicate whose own run fails gets the stored response',
      [new Send(0, 'optimistic', 0, 0), new Send(1, 'optimistic', 0, 0), new Finish(0, 'ok'), new Finish(0, 'fail')],
    ],
  ])('%s', async (_name, sequence) => {
    await simulate(apps, sequence);
  });
});
