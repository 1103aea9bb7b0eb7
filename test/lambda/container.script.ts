/**
 * One Lambda container, run by containers.ts in a process of its own (so that it can be frozen with SIGSTOP, as
 * Lambda freezes a container between invocations): the demo's handler, configured from the environment, invoked
 * through IPC with an event and a deadline.
 */
import { configFromEnv } from '../../apps/orders-api/src/config';
import { lambdaHandler } from '../../apps/orders-api/src/lambda';
import { lambdaContext } from './invocations';

const handler = lambdaHandler(configFromEnv());

process.on('message', async (message: { id: number; event: unknown; deadlineMs: number }) => {
  const context = lambdaContext(message.deadlineMs - Date.now());
  try {
    process.send!({ id: message.id, result: await handler(message.event, context) });
  } catch (error) {
    process.send!({ id: message.id, error: String(error) });
  }
});
process.on('disconnect', () => void handler.close().finally(() => process.exit(0)));
process.send!({ ready: true });
