import { AddressInfo } from 'node:net';
import { INestApplication, ModuleMetadata, Type } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { IdempotencyClock } from 'nestjs-dynamodb-idempotency';
import { ManualClock } from 'nestjs-dynamodb-idempotency/testing';
import { testClock } from './clock';
import { CapturedLogs } from './logs';

export type Platform = 'express' | 'fastify';
export const PLATFORMS: Platform[] = ['express', 'fastify'];

export interface TestApp {
  app: INestApplication;
  url: string;
  /** The module's clock (`realTime`: none; reading it throws). */
  clock: ManualClock;
  get<T>(token: Type<T> | (abstract new (...args: never[]) => T)): T;
  close(): Promise<void>;
}

/**
 * Boots a module on a real HTTP listener (loopback, free port) with a test clock for the idempotency module
 * (`realTime` keeps the module's wall clock; `clock` is one the test also gives its repository). `configure` runs
 * before the app starts (global interceptors, versioning).
 */
export async function startApp(
  platform: Platform,
  metadata: ModuleMetadata,
  options: {
    configure?: (app: INestApplication) => void;
    realTime?: boolean;
    clock?: ManualClock;
    rawBody?: boolean;
  } = {},
): Promise<TestApp> {
  const { configure = () => undefined, realTime = false } = options;
  const clock = options.clock ?? (realTime ? undefined : testClock());
  const builder = Test.createTestingModule(metadata);
  const moduleRef = await (clock ? builder.overrideProvider(IdempotencyClock).useValue(clock) : builder).compile();
  const app = moduleRef.createNestApplication(platform === 'express' ? new ExpressAdapter() : new FastifyAdapter(), {
    // A capture a test has started stays in effect: building an app applies its own logger setting.
    logger: CapturedLogs.active ?? false,
    rawBody: options.rawBody,
  });
  configure(app);
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  return {
    app,
    url: `http://127.0.0.1:${port}`,
    get clock(): ManualClock {
      if (!clock) throw new Error('this app runs in real time: it has no test clock');
      return clock;
    },
    get: (token) => app.get(token as Type),
    close: () => app.close(),
  };
}

/** A POST with a JSON body and optional idempotency key; returns status, headers and the raw body text. */
export function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  return sendJson('POST', url, body, headers);
}

/** A request of any method with a JSON body; returns status, headers and the raw body text. */
export async function sendJson(method: string, url: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}
