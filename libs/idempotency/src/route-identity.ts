import { ExecutionContext } from '@nestjs/common';
import { PATH_METADATA } from '@nestjs/common/constants';

/**
 * The route template (`/orders/:id`), from the controller and handler metadata rather than the URL, so that
 * it is the same on Express and Fastify and does not vary with path parameters.
 */
export function routeTemplate(context: ExecutionContext): string {
  const handler = context.getHandler();
  let template = templates.get(handler);
  if (template === undefined) {
    template = readRouteTemplate(context);
    templates.set(handler, template);
  }
  return template;
}

/** Route metadata is fixed once the app is built: read it once per handler. */
const templates = new WeakMap<object, string>();

function readRouteTemplate(context: ExecutionContext): string {
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

/** A message handler's pattern(s), as stable text: the route of a message. */
export function rpcPattern(context: ExecutionContext): string {
  const patterns: unknown = Reflect.getMetadata('microservices:pattern', context.getHandler());
  return JSON.stringify(patterns ?? `${context.getClass().name}.${context.getHandler().name}`);
}
