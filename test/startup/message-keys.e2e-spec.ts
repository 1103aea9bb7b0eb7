import { Controller, INestApplication } from '@nestjs/common';
import {
  ClientProxy,
  ClientProxyFactory,
  MessagePattern,
  MicroserviceOptions,
  Payload,
  Transport,
} from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import {
  Idempotent,
  IdempotencyModule,
  IdempotencyOutcomeEvent,
  InMemoryIdempotencyRepository,
  ProblemType,
} from 'nestjs-dynamodb-idempotency';
import { lastValueFrom } from 'rxjs';
import { AddressInfo, Server } from 'node:net';

@Controller()
class RiskyConsumer {
  @MessagePattern('risky')
  @Idempotent({ key: (message: { id: string }) => message.id.toUpperCase() })
  handle(@Payload() message: { id: string }) {
    return { handled: message.id };
  }
}

let paidRuns = 0;
const events: IdempotencyOutcomeEvent[] = [];

@Controller()
class PaymentConsumer {
  @MessagePattern('paid')
  @Idempotent({
    key: (message: { id: string }) => message.id,
    fingerprint: (message: { orderId: string; deliveredAt: string }) => ({ orderId: message.orderId }),
  })
  handle(@Payload() message: { orderId: string; deliveredAt: string }) {
    paidRuns += 1;
    return { recorded: message.orderId, deliveredAt: message.deliveredAt };
  }

  @MessagePattern('paid-broken')
  @Idempotent({
    key: (message: { id: string }) => message.id,
    fingerprint: (message: { orderId: { toUpperCase(): string } }) => message.orderId.toUpperCase(),
  })
  broken() {
    paidRuns += 1;
    return { recorded: true };
  }
}

describe('message handler keys and fingerprints', () => {
  let app: INestApplication;
  let client: ClientProxy;
  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRoot({
          repository: new InMemoryIdempotencyRepository(),
          onOutcome: (event) => events.push(event),
        }),
      ],
      controllers: [RiskyConsumer, PaymentConsumer],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    const transport = app.connectMicroservice<MicroserviceOptions>({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port: 0 },
    });
    await app.startAllMicroservices();
    await app.init();
    const { port } = transport.unwrap<Server>().address() as AddressInfo;
    client = ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
    await client.connect();
  });
  afterAll(async () => {
    client.close();
    await app.close();
  });

  it('answers a key function that throws with the key-invalid problem, never a raw error', async () => {
    await expect(lastValueFrom(client.send('risky', { noId: true }))).rejects.toMatchObject({
      type: ProblemType.keyInvalid,
      status: 400,
    });
    expect(await lastValueFrom(client.send('risky', { id: 'm-1' }))).toEqual({ handled: 'm-1' });
  });

  it('takes the fingerprint the handler chose: a redelivery with another deliveredAt gets the first reply', async () => {
    const before = paidRuns;
    const first = await lastValueFrom(client.send('paid', { id: 'p-1', orderId: 'o-1', deliveredAt: '10:00' }));
    const again = await lastValueFrom(client.send('paid', { id: 'p-1', orderId: 'o-1', deliveredAt: '10:05' }));
    expect(again).toEqual(first);
    expect(first).toEqual({ recorded: 'o-1', deliveredAt: '10:00' });
    await expect(
      lastValueFrom(client.send('paid', { id: 'p-1', orderId: 'o-2', deliveredAt: '10:00' })),
    ).rejects.toMatchObject({ type: ProblemType.fingerprintMismatch, status: 422 });
    expect(paidRuns).toBe(before + 1);
  });

  it('answers a fingerprint function that throws with fingerprint-failed; the handler does not run', async () => {
    const before = paidRuns;
    await expect(lastValueFrom(client.send('paid-broken', { id: 'p-2' }))).rejects.toMatchObject({
      type: ProblemType.fingerprintFailed,
      status: 500,
    });
    expect(paidRuns).toBe(before);
  });

  it('reports each message call to onOutcome: executed, then replayed, as the rpc transport', async () => {
    const before = events.length;
    await lastValueFrom(client.send('paid', { id: 'p-3', orderId: 'o-3', deliveredAt: '10:00' }));
    await lastValueFrom(client.send('paid', { id: 'p-3', orderId: 'o-3', deliveredAt: '10:01' }));
    expect(events.slice(before)).toEqual([
      expect.objectContaining({ outcome: 'executed', transport: 'rpc', operation: 'RPC ["paid"]', statusCode: 200 }),
      expect.objectContaining({ outcome: 'replayed', transport: 'rpc', operation: 'RPC ["paid"]', statusCode: 200 }),
    ]);
    expect(events[before].recordKey).toBe(events[before + 1].recordKey);
  });
});
