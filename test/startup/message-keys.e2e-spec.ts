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
import { Idempotent, IdempotencyModule, InMemoryIdempotencyRepository, ProblemType } from 'nestjs-dynamodb-idempotency';
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

describe('message handler keys', () => {
  let app: INestApplication;
  let client: ClientProxy;
  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository() })],
      controllers: [RiskyConsumer],
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
});
