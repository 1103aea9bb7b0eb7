import { ConfigurableModuleBuilder } from '@nestjs/common';
import { IdempotencyModuleOptions } from './options/idempotency.options';

export const {
  ConfigurableModuleClass: ConfigurableIdempotencyModule,
  MODULE_OPTIONS_TOKEN: IDEMPOTENCY_MODULE_OPTIONS,
  OPTIONS_TYPE: IDEMPOTENCY_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: IDEMPOTENCY_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<IdempotencyModuleOptions>({ moduleName: 'Idempotency' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();
