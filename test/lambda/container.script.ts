/**
 * One Lambda container, run by containers.ts in a process of its own (so that it can be frozen with SIGSTOP, as
 * Lambda freezes a container between invocations): the demo's handler, configured from the environment, invoked
 * through IPC with an event and a deadline.
 */
import { configFromEnv } from '../../apps/orders-api/src/config';
import { lambdaHandler } from '../../apps/orders-api/src/lambda';
import { serveInvocations } from './invocations';

const handler = lambdaHandler(configFromEnv());

serveInvocations(handler, () => handler.close());
