import { STATUS_CODES } from 'node:http';
import { ArgumentsHost, Catch, HttpException } from '@nestjs/common';
import { BaseExceptionFilter } from '@nestjs/core';

/**
 * The demo answers its own errors (validation, 404, a malformed JSON body) as RFC 9457 problem details too, like the
 * idempotency module does. Registered globally, so it also sees the body parser's errors and unknown routes. Anything
 * that is not an HttpException goes to Nest's default handling (a logged 500).
 */
@Catch()
export class ProblemDetailsFilter extends BaseExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    if (!(exception instanceof HttpException) || host.getType() !== 'http') return super.catch(exception, host);
    const status = exception.getStatus();
    const body = exception.getResponse();
    // Nest's own fields (message, statusCode, error: 'Bad Request') become the problem's; anything else the exception
    // carries (Terminus's health details) stays.
    const {
      message,
      statusCode: _statusCode,
      ...extensions
    } = typeof body === 'string' ? { message: body } : (body as Record<string, unknown>);
    if (typeof extensions.error === 'string') delete extensions.error;
    const problem = {
      type: 'about:blank',
      title: STATUS_CODES[status] ?? 'Error',
      status,
      detail: Array.isArray(message) ? message.join('; ') : String(message ?? exception.message),
      ...extensions,
    };
    const adapter = this.applicationRef!;
    const response = host.switchToHttp().getResponse();
    adapter.setHeader(response, 'Content-Type', 'application/problem+json');
    if (status === 503) adapter.setHeader(response, 'Retry-After', '1');
    adapter.reply(response, JSON.stringify(problem), status);
  }
}
