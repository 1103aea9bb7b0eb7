import { ClientProxy, ClientProxyFactory, Transport } from '@nestjs/microservices';
import { ProblemType } from 'nestjs-dynamodb-idempotency';
import { lastValueFrom } from 'rxjs';
import { configFromEnv } from '../../apps/orders-api/src/config';
import { RunningOrdersApi, startOrdersApi } from '../../apps/orders-api/src/orders-api';
import { post } from '../support/app';
import { metricValue } from '../support/telemetry';

describe('orders-api payments consumer (TCP microservice)', () => {
  let api: RunningOrdersApi;
  let client: ClientProxy;

  beforeAll(async () => {
    api = await startOrdersApi(configFromEnv({ PORT: '0' }), { logger: false });
    client = ClientProxyFactory.create({ transport: Transport.TCP, options: api.microservice });
    await client.connect();
  });
  afterAll(async () => {
    client.close();
    await api.close();
  });

  const replayed = async () =>
    metricValue(await (await fetch(`${api.url}/metrics`)).text(), 'idempotency_requests_total', {
      outcome: 'replayed',
    });
  const until = async (condition: () => Promise<boolean>) => {
    for (let i = 0; i < 200 && !(await condition()); i++) await new Promise((resolve) => setTimeout(resolve, 25));
  };

  it('records a redelivered payment event once', async () => {
    const created = JSON.parse(
      (await post(`${api.url}/orders`, { item: 'desk', quantity: 1 }, { 'Idempotency-Key': 'paid-order' })).text,
    );
    const message = { messageId: 'msg-1', orderId: created.id, amount: 120 };
    const orderNow = async () =>
      (await (await fetch(`${api.url}/orders/${created.id}`)).json()) as { payments?: number; paidTotal?: number };

    await lastValueFrom(client.emit('order.paid', message), { defaultValue: undefined });
    await until(async () => (await orderNow()).payments === 1);
    const replaysBefore = await replayed();
    await lastValueFrom(client.emit('order.paid', message), { defaultValue: undefined });
    await lastValueFrom(client.emit('order.paid', message), { defaultValue: undefined });
    await until(async () => (await replayed()) === replaysBefore + 2);

    expect(await replayed()).toBe(replaysBefore + 2);
    expect(await orderNow()).toMatchObject({ payments: 1, paidTotal: 120 });

    await lastValueFrom(client.emit('order.paid', { ...message, messageId: 'msg-2' }), { defaultValue: undefined });
    await until(async () => (await orderNow()).payments === 2);
    expect(await orderNow()).toMatchObject({ payments: 2, paidTotal: 240 });
  });

  it('answers a repeated request with the same reply', async () => {
    const request = { requestId: 'quote-1', item: 'chair', quantity: 3 };
    const first = await lastValueFrom(client.send('order.quote', request));
    const second = await lastValueFrom(client.send('order.quote', request));
    expect(first).toEqual({ quoteId: expect.any(String), item: 'chair', quantity: 3, total: 30 });
    expect(second).toEqual(first);
    const other = await lastValueFrom(client.send('order.quote', { ...request, requestId: 'quote-2' }));
    expect(other.quoteId).not.toBe(first.quoteId);
  });

  it('replays a final error (RpcException, status 410) to a repeated request, and lets a 422 run again', async () => {
    const discontinued = { requestId: 'quote-gone', item: 'discontinued-stool', quantity: 1 };
    const replaysBefore = await replayed();
    const first = await lastValueFrom(client.send('order.quote', discontinued)).catch((error: unknown) => error);
    const second = await lastValueFrom(client.send('order.quote', discontinued)).catch((error: unknown) => error);
    expect(first).toEqual({ status: 410, message: 'discontinued-stool is no longer sold' });
    expect(second).toEqual(first);
    expect(await replayed()).toBe(replaysBefore + 1);

    const tooMany = { requestId: 'quote-too-many', item: 'chair', quantity: 5000 };
    const rejected = await lastValueFrom(client.send('order.quote', tooMany)).catch((error: unknown) => error);
    const again = await lastValueFrom(client.send('order.quote', tooMany)).catch((error: unknown) => error);
    expect(rejected).toEqual({ status: 422, message: 'quantity must be 1–1000' });
    expect(again).toEqual(rejected);
    expect(await replayed()).toBe(replaysBefore + 1);
  });

  it('refuses a reused request id with a different message, and a message without an id', async () => {
    await lastValueFrom(client.send('order.quote', { requestId: 'quote-3', item: 'chair', quantity: 3 }));
    await expect(
      lastValueFrom(client.send('order.quote', { requestId: 'quote-3', item: 'sofa', quantity: 1 })),
    ).rejects.toMatchObject({
      type: ProblemType.fingerprintMismatch,
      status: 422,
    });
    await expect(lastValueFrom(client.send('order.quote', { item: 'sofa', quantity: 1 }))).rejects.toMatchObject({
      type: ProblemType.keyMissing,
    });
  });
});
