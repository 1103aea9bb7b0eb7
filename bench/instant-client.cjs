// A DynamoDB client whose every call is answered `{}` at once: the SDK's own work, no network. Shared by
// bench/module-cpu.ts and bench/repository-calls.cjs.
const { Readable } = require('node:stream');
const { DynamoDBClient } = require('@aws-sdk/client-dynamodb');
const { HttpResponse } = require('@smithy/core/transport');

/** @returns {import('@aws-sdk/client-dynamodb').DynamoDBClient} */
function instantClient() {
  const requestHandler = {
    handle: async () => ({
      response: new HttpResponse({
        statusCode: 200,
        headers: { 'content-type': 'application/x-amz-json-1.0' },
        body: Readable.from([Buffer.from('{}')]),
      }),
    }),
    updateHttpClientConfig() {},
    httpHandlerConfigs: () => ({}),
  };
  return new DynamoDBClient({
    region: 'us-east-1',
    endpoint: 'http://127.0.0.1:1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    requestHandler,
  });
}

module.exports = { instantClient };
