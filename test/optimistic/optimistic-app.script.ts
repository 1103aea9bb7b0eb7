/**
 * One app instance with the optimistic routes, in a process of its own so that a test can SIGKILL it mid-request:
 * started by crash.e2e-spec.ts with DYNAMODB_ENDPOINT, IDEMPOTENCY_TABLE and ORDERS_TABLE; tells its URL over IPC.
 */
import { Test } from '@nestjs/testing';
import { AddressInfo } from 'node:net';
import { localClient } from '../support/dynalite';
import { optimisticModule } from './optimistic.fixture';

async function main(): Promise<void> {
  const { DYNAMODB_ENDPOINT, IDEMPOTENCY_TABLE, ORDERS_TABLE } = process.env;
  const moduleRef = await Test.createTestingModule(
    optimisticModule(localClient(DYNAMODB_ENDPOINT!), IDEMPOTENCY_TABLE!, ORDERS_TABLE!),
  ).compile();
  const app = moduleRef.createNestApplication({ logger: ['error'] });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  process.send!({ url: `http://127.0.0.1:${port}` });
}

void main();
