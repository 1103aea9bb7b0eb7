import { ClassSerializerContextOptions, ClassSerializerInterceptor, ExecutionContext, Type } from '@nestjs/common';
import { ModuleRef, Reflector } from '@nestjs/core';
import { applicationConfigOf } from '../nest-internals';
import { CLASS_SERIALIZER_OPTIONS, INTERCEPTORS_METADATA } from '../nest-internals';

type Serializer = ClassSerializerInterceptor;

/**
 * The body as the client receives it when a `ClassSerializerInterceptor` runs outside `@Idempotent()` (registered
 * with `useGlobalInterceptors`, `APP_INTERCEPTOR` or `@UseInterceptors` on the controller or before `@Idempotent()`):
 * the serializer applied with its own options and the route's `@SerializeOptions()`, at any depth. Without one in
 * the route's chain the value is left as it is, since then the client receives it unserialized too. Either way the
 * stored body is what the first client was sent, so a replay never carries a field the first response did not.
 */
export class ClassSerialization {
  /** Per handler: the serializer in its chain, or null. Interceptor chains are fixed once the app is built. */
  private readonly serializers = new WeakMap<object, Serializer | null>();

  constructor(
    private readonly reflector: Reflector,
    private readonly moduleRef: ModuleRef,
  ) {}

  asSent(value: unknown, context: ExecutionContext): unknown {
    if (value === null || typeof value !== 'object') return value;
    const serializer = this.serializerOf(context);
    if (!serializer) return value;
    const routeOptions = this.reflector.getAllAndOverride<ClassSerializerContextOptions>(CLASS_SERIALIZER_OPTIONS, [
      context.getHandler(),
      context.getClass(),
    ]);
    // As Nest runs it: the options given to its constructor are the defaults of every call.
    const defaults = (serializer as unknown as { defaultOptions?: ClassSerializerContextOptions }).defaultOptions;
    return serializer.serialize(value as object, { ...defaults, ...routeOptions });
  }

  private serializerOf(context: ExecutionContext): Serializer | undefined {
    const handler = context.getHandler();
    let serializer = this.serializers.get(handler);
    if (serializer === undefined) {
      serializer = this.findSerializer(context) ?? null;
      this.serializers.set(handler, serializer);
    }
    return serializer ?? undefined;
  }

  private findSerializer(context: ExecutionContext): Serializer | undefined {
    const chain: unknown[] = [
      ...(applicationConfigOf(this.moduleRef)?.getGlobalInterceptors() ?? []),
      ...(Reflect.getMetadata(INTERCEPTORS_METADATA, context.getClass()) ?? []),
      ...(Reflect.getMetadata(INTERCEPTORS_METADATA, context.getHandler()) ?? []),
    ];
    for (const entry of chain) {
      if (entry instanceof ClassSerializerInterceptor) return entry;
      if (typeof entry === 'function' && entry.prototype instanceof ClassSerializerInterceptor) {
        return new (entry as Type<Serializer>)(this.reflector);
      }
      if (entry === ClassSerializerInterceptor) return new ClassSerializerInterceptor(this.reflector);
    }
    return undefined;
  }
}
