import { ArgumentsHost, Catch, ExceptionFilter } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { IdempotencyProblemException } from '../errors/problem';

/**
 * Sends `IdempotencyProblemException` as `application/problem+json` (RFC 9457) with its headers.
 * The body goes out as a string: Nest's adapters reset the content type of object error bodies to
 * `application/json`.
 */
@Catch(IdempotencyProblemException)
export class IdempotencyExceptionFilter implements ExceptionFilter<IdempotencyProblemException> {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(exception: IdempotencyProblemException, host: ArgumentsHost): void {
    if (host.getType() !== 'http') throw exception;
    const adapter = this.adapterHost.httpAdapter;
    const response = host.switchToHttp().getResponse();
    adapter.setHeader(response, 'Content-Type', 'application/problem+json');
    for (const [name, value] of Object.entries(exception.headers)) adapter.setHeader(response, name, value);
    adapter.reply(response, JSON.stringify(exception.problem), exception.problem.status);
  }
}
