import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { DynamoDbIdempotencyRepository, IdempotencyStoreUnavailableError } from 'nestjs-dynamodb-idempotency';
import { localClient } from '../support/dynalite';

/**
 * Network faults reach the repository the way the SDK delivers them (over a real socket) and keep a specific
 * `dynamoErrorCode` for logs and the store-call metric, never `UnknownError`.
 */
describe('store error names', () => {
  const servers: Server[] = [];
  afterAll(() => servers.forEach((server) => server.close()));

  async function endpointThat(answer: (socket: import('node:net').Socket) => void): Promise<string> {
    const server = createServer((request) => answer(request.socket));
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  const failureOf = async (endpoint: string) => {
    const repository = new DynamoDbIdempotencyRepository({ client: localClient(endpoint), tableName: 'names' });
    return repository.get({ key: 'k' }).then(
      () => undefined,
      (error: unknown) => error,
    );
  };

  it.each([
    ['a connection reset', (socket: import('node:net').Socket) => socket.resetAndDestroy(), 'ECONNRESET'],
    ['a socket hang up', (socket: import('node:net').Socket) => socket.destroy(), 'ECONNRESET'],
  ])('names %s', async (_name, answer, code) => {
    const error = await failureOf(await endpointThat(answer));
    expect(error).toBeInstanceOf(IdempotencyStoreUnavailableError);
    expect(error).toMatchObject({ dynamoErrorCode: code });
  });

  it('names a refused connection', async () => {
    const endpoint = await endpointThat(() => undefined);
    await new Promise((resolve) => servers.pop()!.close(resolve));
    expect(await failureOf(endpoint)).toMatchObject({ dynamoErrorCode: 'ECONNREFUSED' });
  });
});
