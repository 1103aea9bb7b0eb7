import { randomUUID } from 'node:crypto';
import { BadRequestException, PipeTransform } from '@nestjs/common';

export interface Order {
  id: string;
  item: string;
  quantity: number;
  /** ISO 8601. */
  createdAt: string;
  /** Set by the `order.paid` consumer: how many payments were recorded (1, however often the event arrived). */
  payments?: number;
  paidTotal?: number;
  paidAt?: string;
}

export interface CreateOrderInput {
  item: string;
  quantity: number;
}

/** A new order of `input`: a new id, created now. */
export function newOrder(input: CreateOrderInput): Order {
  return { id: randomUUID(), item: input.item, quantity: input.quantity, createdAt: new Date().toISOString() };
}

/** `{ item: non-empty string, quantity: positive integer }`; anything else is a 400. */
export class CreateOrderPipe implements PipeTransform<unknown, CreateOrderInput> {
  transform(value: unknown): CreateOrderInput {
    const { item, quantity } = (value ?? {}) as Record<string, unknown>;
    const problems: string[] = [];
    if (typeof item !== 'string' || item.trim().length === 0 || item.length > 200) {
      problems.push('item must be a non-empty string of at most 200 characters');
    }
    if (typeof quantity !== 'number' || !Number.isSafeInteger(quantity) || quantity < 1) {
      problems.push('quantity must be a positive integer');
    }
    if (problems.length > 0) throw new BadRequestException(problems.join('; '));
    return { item: item as string, quantity: quantity as number };
  }
}
