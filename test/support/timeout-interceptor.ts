import {
  CallHandler,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  RequestTimeoutException,
  Type,
} from '@nestjs/common';
import { catchError, Observable, throwError, timeout, TimeoutError } from 'rxjs';

/** Nest's documented TimeoutInterceptor (https://docs.nestjs.com/interceptors), answering 408 after `ms`. */
export function timeoutInterceptor(ms: number): Type<NestInterceptor> {
  @Injectable()
  class TimeoutInterceptor implements NestInterceptor {
    intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
      return next.handle().pipe(
        timeout(ms),
        catchError((error) =>
          error instanceof TimeoutError ? throwError(() => new RequestTimeoutException()) : throwError(() => error),
        ),
      );
    }
  }
  return TimeoutInterceptor;
}
