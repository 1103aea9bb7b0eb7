import {
  DescribeTableCommand,
  DynamoDBClient,
  ResourceNotFoundException,
  TableDescription,
  TimeToLiveDescription,
} from '@aws-sdk/client-dynamodb';
import {
  checkIdempotencyTable,
  describeTable,
  keySchemaProblem,
  locationOf,
  tableReadiness,
  TableSpec,
  unusableBecause,
} from './table-checks';
import { TableLayout } from './table-layout';

/**
 * What the startup check and `table:check` say, for the answers no local server gives on demand: a credentials
 * refusal, IAM, an endpoint with a path, a table still CREATING, a provisioned table, a TTL API that fails.
 */
const where = { tableName: 'keys', region: 'eu-west-1' };
const named = (name: string, message = 'refused') => Object.assign(new Error(message), { name });

const ACTIVE: TableDescription = {
  KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
  AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
  TableStatus: 'ACTIVE',
  BillingModeSummary: { BillingMode: 'PAY_PER_REQUEST' },
};

/** A client whose `DescribeTable` and `DescribeTimeToLive` answer as given (a function throws). */
function clientAnswering(table: () => TableDescription, ttl: () => TimeToLiveDescription, endpoint?: string) {
  const client = new DynamoDBClient({
    region: 'eu-west-1',
    endpoint,
    credentials: { accessKeyId: 'k', secretAccessKey: 's' },
  });
  jest
    .spyOn(client, 'send')
    .mockImplementation(async (command: unknown) =>
      command instanceof DescribeTableCommand ? { Table: table() } : { TimeToLiveDescription: ttl() },
    );
  return client;
}

const ttlOn = (AttributeName: string): TimeToLiveDescription => ({ TimeToLiveStatus: 'ENABLED', AttributeName });

describe('why a table cannot be used (unusableBecause)', () => {
  it('names IAM for AccessDeniedException, with the error text and the way out', () => {
    expect(unusableBecause(named('AccessDeniedException', 'User x is not authorized'), where)).toBe(
      'these credentials may not call dynamodb:DescribeTable on it (User x is not authorized). Grant it (see IAM in the docs), or set failOnStartup: false.',
    );
  });

  it.each(['UnrecognizedClientException', 'InvalidSignatureException'])('names the credentials for %s', (code) => {
    expect(unusableBecause(named(code), where)).toBe(
      `DynamoDB rejected the credentials (${code}). Check the access key, the secret and the region.`,
    );
  });

  it('names any other error with its code and text, and says where to look', () => {
    expect(unusableBecause(named('InternalServerError', 'boom'), where)).toBe(
      'DescribeTable failed with InternalServerError (boom). Check that DynamoDB is reachable at this endpoint and region.',
    );
    expect(unusableBecause('not an error', where)).toBe(
      'DescribeTable failed with UnknownError (not an error). Check that DynamoDB is reachable at this endpoint and region.',
    );
  });

  it('gives the create command with the region, and without an endpoint on AWS itself', () => {
    expect(unusableBecause(new ResourceNotFoundException({ message: 'no', $metadata: {} }), where)).toBe(
      "the table does not exist. Create it once: npx nestjs-dynamodb-idempotency table:create --table keys --region eu-west-1, or ensureIdempotencyTable(client, 'keys') before the app starts.",
    );
    expect(unusableBecause(named('ResourceNotFoundException'), { tableName: 'keys' })).toContain(
      'table:create --table keys, or',
    );
  });
});

describe('where a table is (locationOf, describeTable)', () => {
  it('names the region, and an endpoint only when one is set', () => {
    expect(describeTable(where)).toBe('Idempotency table "keys" (region eu-west-1)');
    expect(describeTable({ tableName: 'keys' })).toBe('Idempotency table "keys" (region unset)');
  });

  it('writes the endpoint as given: its port when it has one, its path unless it is /', async () => {
    const at = (endpoint?: string) =>
      locationOf(
        clientAnswering(
          () => ACTIVE,
          () => ttlOn('expires_at'),
          endpoint,
        ),
        't',
      );
    expect(await at('http://localhost:4567')).toEqual({
      tableName: 't',
      region: 'eu-west-1',
      endpoint: 'http://localhost:4567',
    });
    expect((await at('https://dynamodb.example.com/proxy')).endpoint).toBe('https://dynamodb.example.com/proxy');
    expect((await at()).endpoint).toBeUndefined();
  });

  it('says why the module cannot use a table, or nothing when it can', async () => {
    const layout = new TableLayout();
    const denied = clientAnswering(
      () => {
        throw named('AccessDeniedException', 'no');
      },
      () => ttlOn('expires_at'),
    );
    expect((await tableReadiness(denied, 'keys', layout)).problem).toBe(
      'Idempotency table "keys" (region eu-west-1): these credentials may not call dynamodb:DescribeTable on it (no). ' +
        'Grant it (see IAM in the docs), or set failOnStartup: false.',
    );
    expect(
      await tableReadiness(
        clientAnswering(
          () => ACTIVE,
          () => ttlOn('expires_at'),
        ),
        'keys',
        layout,
      ),
    ).toEqual({ mode: undefined });
  });
});

describe("what is wrong with a table's key (keySchemaProblem)", () => {
  const expected = "the module is configured for pk (S, HASH). Set keySchema to the table's keys";

  it('says the key is missing when the description has none', () => {
    expect(keySchemaProblem(new TableLayout(), { TableStatus: 'ACTIVE' })).toContain(`its key is missing; ${expected}`);
  });

  it('writes ? for a key attribute the description does not define', () => {
    const table = { KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' as const }], AttributeDefinitions: [] };
    expect(keySchemaProblem(new TableLayout(), table)).toContain(`its key is id (?, HASH); ${expected}`);
  });
});

describe('the deploy-time check (checkIdempotencyTable)', () => {
  it('passes a table with the key, ACTIVE, on demand, with TTL on the expiry attribute', async () => {
    const check = await checkIdempotencyTable(
      clientAnswering(
        () => ACTIVE,
        () => ttlOn('expires_at'),
      ),
      'keys',
    );
    expect(check).toEqual({
      ok: true,
      findings: [
        'ok: key schema is pk (S, HASH)',
        'ok: table is ACTIVE',
        expect.stringContaining(
          'note: no index of keys in flight (in_flight): every sweep and PENDING listing reads the whole table (docs/scaling.md). Add it: aws dynamodb update-table --table-name keys --attribute-definitions AttributeName=in_flight,AttributeType=S AttributeName=expires_at,AttributeType=N --global-secondary-index-updates \'[{"Create":{"IndexName":"in_flight"',
        ),
        'ok: TTL is ENABLED on expires_at',
      ],
    });
  });

  it('checks a single-table layout: both keys, and TTL on the renamed expiry attribute', async () => {
    const table: TableDescription = {
      ...ACTIVE,
      KeySchema: [
        { AttributeName: 'PK', KeyType: 'HASH' },
        { AttributeName: 'SK', KeyType: 'RANGE' },
      ],
      AttributeDefinitions: [
        { AttributeName: 'PK', AttributeType: 'S' },
        { AttributeName: 'SK', AttributeType: 'S' },
      ],
    };
    const spec = {
      tableName: 'app',
      keySchema: { partitionKey: 'PK', sortKey: 'SK' },
      attributeNames: { expires_at: 'ttl' },
    };
    expect(
      await checkIdempotencyTable(
        clientAnswering(
          () => table,
          () => ttlOn('ttl'),
        ),
        spec,
      ),
    ).toEqual({
      ok: true,
      findings: [
        'ok: key schema is PK (S, HASH), SK (S, RANGE)',
        'ok: table is ACTIVE',
        expect.stringContaining('AttributeName=in_flight,AttributeType=S AttributeName=ttl,AttributeType=N'),
        'ok: TTL is ENABLED on ttl',
      ],
    });
    const wrongKeys = await checkIdempotencyTable(
      clientAnswering(
        () => ACTIVE,
        () => ttlOn('ttl'),
      ),
      spec,
    );
    expect(wrongKeys.ok).toBe(false);
    expect(wrongKeys.findings[0]).toBe(
      'FAIL: its key is pk (S, HASH); the module is configured for PK (S, HASH), SK (S, RANGE). ' +
        "Set keySchema to the table's keys (partitionKey, sortKey), use another tableName, or create one with table:create.",
    );
  });

  it('fails a table still CREATING, notes provisioned billing, and fails TTL on another attribute', async () => {
    const table: TableDescription = { ...ACTIVE, TableStatus: 'CREATING', BillingModeSummary: undefined };
    const check = await checkIdempotencyTable(
      clientAnswering(
        () => table,
        () => ttlOn('ttl'),
      ),
      'keys',
    );
    expect(check).toEqual({
      ok: false,
      findings: [
        'ok: key schema is pk (S, HASH)',
        'FAIL: table status is CREATING',
        'note: billing mode is not PAY_PER_REQUEST; under-provisioned WCU shows up as 503 store-throttled',
        expect.stringContaining('note: no index of keys in flight (in_flight)'),
        'FAIL: TTL is ENABLED on ttl, expected ENABLED on expires_at (dynalite cannot enable or report TTL: run this check against DynamoDB)',
      ],
    });
  });

  it('fails TTL that is not enabled, or cannot be described, naming why', async () => {
    const disabled = await checkIdempotencyTable(
      clientAnswering(
        () => ACTIVE,
        () => ({}),
      ),
      'keys',
    );
    expect(disabled.findings[3]).toBe(
      'FAIL: TTL is unknown, expected ENABLED on expires_at (dynalite cannot enable or report TTL: run this check against DynamoDB)',
    );
    const failing = clientAnswering(
      () => ACTIVE,
      () => {
        throw named('AccessDeniedException');
      },
    );
    expect(await checkIdempotencyTable(failing, 'keys')).toEqual({
      ok: false,
      findings: [
        'ok: key schema is pk (S, HASH)',
        'ok: table is ACTIVE',
        expect.stringContaining('note: no index of keys in flight (in_flight)'),
        'FAIL: TTL cannot be described (AccessDeniedException)',
      ],
    });
  });

  it('fails a table that cannot be described, with the code and nothing else', async () => {
    const missing = clientAnswering(
      () => {
        throw named('ResourceNotFoundException');
      },
      () => ttlOn('expires_at'),
    );
    expect(await checkIdempotencyTable(missing, 'keys')).toEqual({
      ok: false,
      findings: ['FAIL: table keys cannot be described (ResourceNotFoundException)'],
    });
  });

  it('reports the index of keys in flight: ACTIVE, another status, other keys, or missing with the command that adds it', async () => {
    const withIndex = (status: string, keys: [string, string] = ['in_flight', 'expires_at']): TableDescription => ({
      ...ACTIVE,
      GlobalSecondaryIndexes: [
        {
          IndexName: 'in_flight',
          IndexStatus: status as 'ACTIVE',
          KeySchema: [
            { AttributeName: keys[0], KeyType: 'HASH' },
            { AttributeName: keys[1], KeyType: 'RANGE' },
          ],
        },
      ],
    });
    const findingFor = async (table: TableDescription, spec: TableSpec | string = 'keys') =>
      (
        await checkIdempotencyTable(
          clientAnswering(
            () => table,
            () => ttlOn('expires_at'),
          ),
          spec,
        )
      ).findings.find((line) => /index/i.test(line));
    expect(await findingFor(withIndex('ACTIVE'))).toBe('ok: the index of keys in flight in_flight is ACTIVE');
    expect(await findingFor(withIndex('CREATING'))).toBe('note: the index of keys in flight in_flight is CREATING');
    expect(await findingFor(withIndex('ACTIVE', ['other', 'expires_at']))).toBe(
      'FAIL: the index in_flight is not keyed by in_flight and expires_at: name another (inFlightIndex) or delete it',
    );
    expect(await findingFor(ACTIVE)).toBe(
      'note: no index of keys in flight (in_flight): every sweep and PENDING listing reads the whole table ' +
        '(docs/scaling.md). Add it: aws dynamodb update-table --table-name keys --attribute-definitions ' +
        'AttributeName=in_flight,AttributeType=S AttributeName=expires_at,AttributeType=N ' +
        '--global-secondary-index-updates \'[{"Create":{"IndexName":"in_flight","KeySchema":[{"AttributeName":"in_flight",' +
        '"KeyType":"HASH"},{"AttributeName":"expires_at","KeyType":"RANGE"}],"Projection":{"ProjectionType":"INCLUDE",' +
        '"NonKeyAttributes":["status","claim_token","fingerprint","pending_since","holder","renewed_at"]}}}]\'',
    );
    // A provisioned table's index gets the table's capacity (DynamoDB refuses an index without it there).
    const provisioned: TableDescription = {
      ...ACTIVE,
      BillingModeSummary: { BillingMode: 'PROVISIONED' },
      ProvisionedThroughput: { ReadCapacityUnits: 40, WriteCapacityUnits: 25 },
    };
    expect(await findingFor(provisioned)).toContain(
      '"NonKeyAttributes":["status","claim_token","fingerprint","pending_since","holder","renewed_at"]},' +
        '"ProvisionedThroughput":{"ReadCapacityUnits":40,"WriteCapacityUnits":25}}}]\'',
    );
    expect(await findingFor({ ...provisioned, BillingModeSummary: undefined })).toContain(
      '"ProvisionedThroughput":{"ReadCapacityUnits":40,"WriteCapacityUnits":25}',
    );
    expect(await findingFor(ACTIVE, { tableName: 'keys', inFlightIndex: false })).toBe(
      'note: inFlightIndex is false: sweeps and PENDING listings read the whole table',
    );
  });
});
