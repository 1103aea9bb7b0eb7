import { ExecutionContext, VERSION_NEUTRAL, VersioningOptions, VersioningType } from '@nestjs/common';
import { MESSAGE_PATTERN_METADATA, PATH_METADATA, VERSION_METADATA } from '../nest-internals';

/**
 * The route template (`/orders/:id`), from the controller and handler metadata rather than the URL, so that
 * it is the same on Express and Fastify and does not vary with path parameters.
 */
export function routeTemplate(context: ExecutionContext): string {
  const handler = context.getHandler();
  let template = templates.get(handler);
  if (template === undefined) {
    template = readRouteTemplate(context.getClass(), handler);
    templates.set(handler, template);
  }
  return template;
}

/** Route metadata is fixed once the app is built: read it once per handler. */
const templates = new WeakMap<object, string>();

/** The route template of a controller's handler, from their path metadata (also read at startup). */
export function readRouteTemplate(type: Function, handler: Function): string {
  const segments: Array<string | string[] | undefined> = [
    Reflect.getMetadata(PATH_METADATA, type),
    Reflect.getMetadata(PATH_METADATA, handler),
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
  const patterns: unknown = Reflect.getMetadata(MESSAGE_PATTERN_METADATA, context.getHandler());
  return JSON.stringify(patterns ?? `${context.getClass().name}.${context.getHandler().name}`);
}

/**
 * The API version that served a request (`'2'`), or undefined for an unversioned route, so that `/v1/orders` and
 * `/v2/orders` (or the same path under header, media-type or custom versioning) never share a record. A handler
 * declaring one version answers only that one; one declaring several, or `VERSION_NEUTRAL`, answers the version the
 * request asked for, read the way Nest's router reads it.
 */
export function requestVersion(
  context: ExecutionContext,
  request: any,
  versioning: VersioningOptions | undefined,
): string | undefined {
  if (!versioning) return undefined;
  const declared: unknown =
    Reflect.getMetadata(VERSION_METADATA, context.getHandler()) ??
    Reflect.getMetadata(VERSION_METADATA, context.getClass()) ??
    versioning.defaultVersion;
  if (declared === undefined) return undefined;
  const versions = ([declared].flat() as Array<string | symbol>).map((version) =>
    version === VERSION_NEUTRAL ? NEUTRAL : String(version),
  );
  if (versions.length === 1) return versions[0];
  return requestedVersions(request, versioning).find((version) => versions.includes(version)) ?? NEUTRAL;
}

/** How a version-neutral route's requests without a (known) version are told apart from versioned ones. */
const NEUTRAL = 'neutral';

function requestedVersions(request: any, versioning: VersioningOptions): string[] {
  const headers = request.headers ?? {};
  switch (versioning.type) {
    case VersioningType.URI: {
      const prefix = versioning.prefix === false ? '' : (versioning.prefix ?? 'v');
      const path = String(request.originalUrl ?? request.url ?? '').split('?')[0];
      return path
        .split('/')
        .filter((segment) => segment.startsWith(prefix))
        .map((segment) => segment.slice(prefix.length));
    }
    case VersioningType.HEADER:
      return [headers[versioning.header.toLowerCase()]].flat().filter(Boolean).map(String);
    case VersioningType.MEDIA_TYPE: {
      // As Nest's router reads it: the first parameter of Accept, after the configured key (`v=`).
      const parameter = String(headers.accept ?? '').split(';')[1];
      const version = parameter?.split(versioning.key)[1];
      return version ? [version] : [];
    }
    case VersioningType.CUSTOM:
      return [versioning.extractor(request)].flat().map(String);
  }
}
