/** An SQS message as a Lambda batch carries it, on the payments queue: its id and body, no attributes. */
const QUEUE = 'arn:aws:sqs:eu-west-1:123456789012:payments';
export const sqs = (messageId: string, body: string) => ({
  messageId,
  receiptHandle: `rh-${messageId}`,
  body,
  attributes: {},
  messageAttributes: {},
  md5OfBody: '',
  eventSource: 'aws:sqs',
  eventSourceARN: QUEUE,
  awsRegion: 'eu-west-1',
});
