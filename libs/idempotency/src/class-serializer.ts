import { ClassSerializerContextOptions, ClassSerializerInterceptor, ExecutionContext } from '@nestjs/common';
import { CLASS_SERIALIZER_OPTIONS } from '@nestjs/common/serializer/class-serializer.constants';
import { Reflector } from '@nestjs/core';

/**
 * Class instances as the client receives them through Nest's `ClassSerializerInterceptor` (`@Exclude()`d fields
 * stripped, `@SerializeOptions()` applied), so a replay never carries a field the first response did not.
 * A global `ClassSerializerInterceptor` runs outside `@Idempotent()` and would otherwise see the raw instance
 * only on the first request. Without class-transformer installed, values pass through unchanged.
 */
export class ClassSerialization {
  private readonly serializer?: ClassSerializerInterceptor;

  constructor(private readonly reflector: Reflector) {
    // Nest's own loader exits the process when class-transformer is missing; look first.
    if (isInstalled('class-transformer')) this.serializer = new ClassSerializerInterceptor(reflector);
  }

  asSent(value: unknown, context: ExecutionContext): unknown {
    if (!this.serializer || !containsClassInstance(value)) return value;
    const options = this.reflector.getAllAndOverride<ClassSerializerContextOptions>(CLASS_SERIALIZER_OPTIONS, [
      context.getHandler(),
      context.getClass(),
    ]);
    return this.serializer.serialize(value as object, options ?? {});
  }
}

function containsClassInstance(value: unknown): boolean {
  const items = Array.isArray(value) ? value : [value];
  return items.some((item) => {
    if (item === null || typeof item !== 'object' || Buffer.isBuffer(item)) return false;
    const prototype = Object.getPrototypeOf(item);
    return prototype !== Object.prototype && prototype !== null && !(item instanceof Date);
  });
}

function isInstalled(name: string): boolean {
  try {
    require.resolve(name);
    return true;
  } catch {
    return false;
  }
}
