import { ArgumentsHost, Catch, HttpException } from '@nestjs/common';
import { BaseExceptionFilter } from '@nestjs/core';

/**
 * The demo answers its own errors (validation, 404) as RFC 9457 problem details too, like the idempotency
 * module does. Anything that is not an HttpException goes to Nest's default handling (a logged 500).
 */
@Catch()
export class ProblemDetailsFilter extends BaseExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    if (!(exception instanceof HttpException) || host.getType() !== 'http') return super.catch(exception, host);
    const status = exception.getStatus();
    const body = exception.getResponse();
    const message = typeof body === 'string' ? body : (body as { message?: unknown }).message;
    const problem = {
      type: 'about:blank',
      title: exception.name.replace(/Exception$/, '').replace(/([a-z])([A-Z])/g, '$1 $2'),
      status,
      detail: Array.isArray(message) ? message.join('; ') : String(message ?? exception.message),
    };
    const adapter = this.httpAdapterHost!.httpAdapter;
    const response = host.switchToHttp().getResponse();
    adapter.setHeader(response, 'Content-Type', 'application/problem+json');
    if (status === 503) adapter.setHeader(response, 'Retry-After', '1');
    adapter.reply(response, JSON.stringify(problem), status);
  }
}
