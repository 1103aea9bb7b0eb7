import { ModuleRef } from '@nestjs/core';
import type { ApplicationConfig } from '@nestjs/core';

/**
 * The application's global settings (global interceptors, versioning). Nest does not offer them as a provider;
 * every `ModuleRef` holds the container that has them (Nest 10 to 12). Undefined if that ever changes, and then
 * the callers fall back to what the route's own metadata says.
 */
export function applicationConfigOf(moduleRef: ModuleRef): ApplicationConfig | undefined {
  return (moduleRef as unknown as { container?: { applicationConfig?: ApplicationConfig } }).container?.applicationConfig;
}
