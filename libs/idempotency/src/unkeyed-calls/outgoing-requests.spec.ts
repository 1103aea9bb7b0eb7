import { channel } from 'node:diagnostics_channel';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { runInClaim, RunningClaim } from '../protocol/idempotency-context';
import { UnrecordedSteps } from '../protocol/unrecorded-steps';
import { observeOutgoingRequests, observingOutgoingRequests } from './outgoing-requests';
import { UnkeyedCall, UnkeyedCallError, UnkeyedCallWatch } from './unkeyed-call-watch';

/**
 * The undici observer against request shapes no local server produces: undici 5's raw header lines (Node's own
 * undici, which the end-to-end suite uses, hands a list), and requests whose reading throws.
 */
const undici = channel('undici:request:create');

class SeenWatch extends UnkeyedCallWatch {
  readonly seen: { route: string; call: UnkeyedCall }[] = [];
  constructor(mode: 'warn' | 'error' = 'error') {
    super(mode, ['X-Request-Key'], new IdempotencyTelemetry());
  }
  override report(route: string, call: UnkeyedCall): UnkeyedCallError | undefined {
    this.seen.push({ route, call });
    return super.report(route, call);
  }
}

function inClaim(watch: UnkeyedCallWatch, fn: () => void): void {
  const claim: RunningClaim = {
    recordKey: 'r',
    fingerprint: 'f',
    claimToken: 't',
    canCommitWith: false,
    writes: [],
    open: true,
    steps: new UnrecordedSteps({ recordKey: 'r', fingerprint: 'f' }),
  };
  claim.watch = watch;
  claim.route = () => 'POST /orders';
  runInClaim(claim, fn, true);
}

function undiciRequest(method: string, headers: string[] | string) {
  return { method, origin: 'https://payments.example', headers, onError: jest.fn() };
}

describe('the undici observer', () => {
  let stop: () => void;
  beforeEach(() => (stop = observeOutgoingRequests()));
  afterEach(() => stop());

  it.each([
    ['raw header lines (undici 5)', 'content-type: application/json\r\nIdempotency-Key: k1\r\n'],
    ['a name/value list', ['content-type', 'application/json', 'IDEMPOTENCY-KEY', 'k1']],
    ['the module’s own key header', ['x-request-key', 'k1']],
    ['x-idempotency-key', 'X-Idempotency-Key: k1\r\n'],
  ])('lets a keyed POST go: the key in %s', (_, headers) => {
    const watch = new SeenWatch();
    const request = undiciRequest('POST', headers);
    inClaim(watch, () => undici.publish({ request }));
    expect(watch.seen).toEqual([]);
    expect(request.onError).not.toHaveBeenCalled();
  });

  it.each([
    ['raw header lines', 'content-type: application/json\r\nx-key: idempotency-key\r\n'],
    ['a name/value list', ['content-type', 'application/json']],
    ['an empty key', ['idempotency-key', '']],
  ])('fails an unkeyed POST with %s, naming the host', (_, headers) => {
    const watch = new SeenWatch();
    const request = undiciRequest('post', headers);
    inClaim(watch, () => undici.publish({ request }));
    expect(watch.seen).toEqual([
      { route: 'POST /orders', call: { kind: 'http', operation: 'POST', target: 'payments.example' } },
    ]);
    expect(request.onError).toHaveBeenCalledWith(expect.any(UnkeyedCallError));
  });

  it('lets SDK requests go: signed, with an invocation id, or the metadata token request', () => {
    const watch = new SeenWatch();
    for (const headers of [
      ['authorization', 'AWS4-HMAC-SHA256 Credential=…'],
      ['amz-sdk-invocation-id', 'abc'],
      ['x-aws-ec2-metadata-token-ttl-seconds', '21600'],
    ])
      inClaim(watch, () => undici.publish({ request: undiciRequest('PUT', headers) }));
    expect(watch.seen).toEqual([]);
  });

  it('never throws into the request: a request it cannot read goes unjudged', () => {
    const watch = new SeenWatch();
    const request = { ...undiciRequest('POST', []), origin: 'not a url' };
    expect(() => inClaim(watch, () => undici.publish({ request }))).not.toThrow();
    expect(request.onError).not.toHaveBeenCalled();
  });

  it('judges nothing outside a protected call, and nothing once every observer stopped', () => {
    const request = undiciRequest('POST', []);
    undici.publish({ request });
    stop();
    const watch = new SeenWatch();
    inClaim(watch, () => undici.publish({ request }));
    expect(watch.seen).toEqual([]);
    expect(request.onError).not.toHaveBeenCalled();
  });

  it('keeps observing while another observer has not stopped; a second stop of the same one changes nothing', () => {
    const other = observeOutgoingRequests();
    stop();
    stop();
    const watch = new SeenWatch();
    inClaim(watch, () => undici.publish({ request: undiciRequest('POST', []) }));
    expect(watch.seen).toHaveLength(1);
    other();
    expect(observingOutgoingRequests()).toBe(false);
    inClaim(watch, () => undici.publish({ request: undiciRequest('POST', []) }));
    expect(watch.seen).toHaveLength(1);
  });
});

describe('UnkeyedCallWatch', () => {
  it("in 'warn' mode answers no error, and counts every call", () => {
    const telemetry = new IdempotencyTelemetry();
    const counted = jest.spyOn(telemetry, 'unkeyedCall');
    const watch = new UnkeyedCallWatch('warn', ['Idempotency-Key'], telemetry);
    const call: UnkeyedCall = { kind: 'dynamodb', operation: 'PutItem', target: 'orders' };
    expect(watch.report('POST /orders', call)).toBeUndefined();
    expect(watch.report('POST /orders', call)).toBeUndefined();
    expect(counted).toHaveBeenCalledTimes(2);
  });
});
