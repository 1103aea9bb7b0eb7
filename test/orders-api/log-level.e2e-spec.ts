import { ConsoleLogger, Logger } from '@nestjs/common';
import { configFromEnv } from '../../apps/orders-api/src/config';
import { RunningOrdersApi, startOrdersApi } from '../../apps/orders-api/src/orders-api';
import { post } from '../support/app';

/**
 * The demo's LOG_LEVEL, read from what Nest's console logger writes to stdout: the module logs every lost claim at
 * debug level (its `dynamo_error_code`); `LOG_LEVEL=log` leaves those lines out and keeps the rest.
 */
describe('the demo’s LOG_LEVEL', () => {
  let written: string[];
  let write: jest.SpyInstance;
  beforeEach(() => {
    // Nest's console logger, as an app has it (the test setup turns logging off).
    Logger.overrideLogger(new ConsoleLogger());
    written = [];
    write = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
  });
  afterEach(() => {
    write.mockRestore();
    Logger.overrideLogger(false);
  });

  /** A duplicate that reaches DynamoDB (the replay cache off), on a demo started with `env`: what it wrote. */
  async function duplicateOn(env: Record<string, string>): Promise<string> {
    let api: RunningOrdersApi | undefined;
    try {
      api = await startOrdersApi(configFromEnv({ PORT: '0', IDEMPOTENCY_REPLAY_CACHE: '0', ...env }));
      for (let i = 0; i < 2; i++) {
        const response = await post(`${api.url}/orders`, { item: 'lamp', quantity: 1 }, { 'Idempotency-Key': 'log' });
        expect(response.status).toBe(201);
      }
      return written.join('');
    } finally {
      await api?.close();
    }
  }

  it('prints the debug line of a lost claim by default', async () => {
    const output = await duplicateOn({});
    expect(output).toContain('conditional write rejected');
    expect(output).toContain('ConditionalCheckFailedException');
  });

  it('leaves debug lines out with LOG_LEVEL=log, and still logs at log level', async () => {
    const output = await duplicateOn({ LOG_LEVEL: 'log' });
    expect(output).not.toContain('conditional write rejected');
    expect(output).toContain('POST /orders'); // the demo's own line once it listens, at log level
  });

  it('refuses a level Nest does not have', () => {
    expect(() => configFromEnv({ LOG_LEVEL: 'trace' })).toThrow(
      'LOG_LEVEL must be one of verbose, debug, log, warn, error, fatal, got "trace"',
    );
  });
});
