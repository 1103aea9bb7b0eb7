import { ExecutionContext } from '@nestjs/common';
import { PATH_METADATA } from '@nestjs/common/constants';

/**
 * The route template (`/orders/:id`), from the controller and handler metadata rather than the URL, so that
 * it is the same on Express and Fastify and does not vary with path parameters.
 */
export function routeTemplate(context: ExecutionContext): string {
  const segments: Array<string | string[] | undefined> = [
    Reflect.getMetadata(PATH_METADATA, context.getClass()),
    Reflect.getMetadata(PATH_METADATA, context.getHandler()),
  ];
  const path = segments
    .map((segment) => (Array.isArray(segment) ? segment.join('|') : (segment ?? '')))
    .map((segment) => segment.replace(/^\/+|\/+$/g, ''))
    .filter((segment) => segment.length > 0)
    .join('/');
  return `/${path}`;
}
