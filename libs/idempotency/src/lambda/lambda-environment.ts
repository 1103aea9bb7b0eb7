/**
 * Whether this process is an AWS Lambda function (`AWS_LAMBDA_FUNCTION_NAME` is set). The module's defaults differ
 * there: a smaller replay cache, and a warning for an in-process reconciler (timers do not fire while the function
 * is frozen between invocations).
 */
export function onLambda(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.AWS_LAMBDA_FUNCTION_NAME);
}
