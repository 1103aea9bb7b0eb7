// The reconciler as a Lambda function, invoked every minute by an EventBridge Scheduler rule
// (ops/aws/reconcile-scheduler.yaml). Bundle it with the package; the function's role needs dynamodb:DescribeTable,
// dynamodb:Query, dynamodb:Scan and dynamodb:UpdateItem on the table and its index in_flight (docs/operating.md#iam).
// With PUSHGATEWAY_URL set (a Pushgateway the function can reach), the sweep's gauges go there for the alert rules;
// the result is also the function's return value and its log line.
import { pushSweepGauges, reconcileTable } from 'nestjs-dynamodb-idempotency';

const tableName = process.env.IDEMPOTENCY_TABLE ?? 'idempotency_keys';

export const handler = async () => {
  const result = await reconcileTable({ tableName }, { maxPagesPerSecond: 5 });
  if (process.env.PUSHGATEWAY_URL) {
    const endedAt = Math.floor(Date.now() / 1000);
    await pushSweepGauges(process.env.PUSHGATEWAY_URL, { table: tableName, result, endedAt, intervalSeconds: 60 });
  }
  // A stuck key the sweep could not release fails the invocation: the function's Errors metric is the alert.
  if (result.unreleased > 0) throw new Error(`${result.unreleased} stuck items could not be released`);
  return result;
};
