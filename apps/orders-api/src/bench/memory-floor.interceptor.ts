import { createHash } from 'node:crypto';
import {
  CallHandler,
  ConflictException,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  UnprocessableEntityException,
} from '@nestjs/common';
import { Observable, of, tap } from 'rxjs';

/** As many records as the module's in-memory store keeps by default (`maxRecords`). */
const MAX_RECORDS = 100_000;

interface FloorRecord {
  status: 'PENDING' | 'COMPLETED';
  fingerprint: string;
  claimToken: string;
  /** The response as JSON text, as the module's in-memory store keeps it. */
  response?: string;
}

/**
 * The in-memory floor (`/bench/floor-memory`): by hand, what any interceptor must do to make a route idempotent on a
 * process-local store, and nothing else. The key and the body hashed (SHA-256), a claim in a `Map` (first writer
 * wins), the handler, its response kept as JSON text; a duplicate gets that response, a different body 422, one in
 * flight 409; at most as many records as the module keeps, the oldest dropped first. No key validation, canonical
 * fingerprint, lease, expiry, status or headers, telemetry or error handling: what the module's in-memory goal is
 * measured against, to show what part of it the calls themselves cost.
 */
@Injectable()
export class MemoryFloorInterceptor implements NestInterceptor {
  private readonly records = new Map<string, FloorRecord>();
  /**
   * Keys in the order claimed, from `oldest` on: what goes first past the limit. Not the `Map`'s own order: iterated
   * from its start, a `Map` walks every entry deleted from its front since it last grew.
   */
  private order: string[] = [];
  private oldest = 0;
  private claims = 0;

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string>; body: unknown }>();
    const key = sha256(`POST /bench/floor-memory#${request.headers['idempotency-key']}`);
    const fingerprint = sha256(JSON.stringify(request.body) ?? '');
    const existing = this.records.get(key);
    if (existing) {
      if (existing.fingerprint !== fingerprint) throw new UnprocessableEntityException('another request');
      if (existing.response === undefined) throw new ConflictException('in progress');
      return of((JSON.parse(existing.response) as { body: unknown }).body);
    }
    const claimToken = `${++this.claims}`; // as cheap as a token can be: unique within this store
    this.records.set(key, { status: 'PENDING', fingerprint, claimToken });
    this.order.push(key);
    if (this.records.size > MAX_RECORDS) this.records.delete(this.order[this.oldest++]);
    if (this.oldest > 1024 && this.oldest * 2 > this.order.length) {
      this.order = this.order.slice(this.oldest);
      this.oldest = 0;
    }
    return next.handle().pipe(
      tap((body) => {
        const response = JSON.stringify({ statusCode: 200, body });
        this.records.set(key, { status: 'COMPLETED', fingerprint, claimToken, response });
      }),
    );
  }
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
