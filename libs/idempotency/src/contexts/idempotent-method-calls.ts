import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { ModulesContainer, Reflector } from '@nestjs/core';
import { MethodCallRunner, ORIGINAL_METHOD, registerRunner } from '../decorators/idempotent-method';
import { IdempotentRoute } from '../decorators/idempotent-route.metadata';
import { ExecutionContextHost } from '../nest-internals';
import { IdempotentMethodOptions, IdempotentOptions, StoreIf } from '../options/idempotency.options';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { IdempotencyService } from '../protocol/idempotency.service';
import { AdaptedWork } from './adapted-work';
import { CallDescriber } from './call-describer';
import { InterceptedCall } from './context-adapter';
import { MethodContextAdapter, methodRoute } from './method.context';

/**
 * Runs the calls of this application's `@Idempotent()` provider methods under the protocol (`IdempotencyService.run`),
 * with the method adapter. It exists from the module's creation, so a queue worker that starts in another module's
 * `onModuleInit` is protected from its first job; an instance is recognised as this application's at its first call.
 */
@Injectable()
export class IdempotentMethodCalls implements MethodCallRunner, OnApplicationShutdown {
  /** Each method's route, worked out at its first call. */
  private readonly routes = new WeakMap<Function, IdempotentOptions>();
  private readonly unregister: () => void;

  constructor(
    private readonly service: IdempotencyService,
    private readonly describer: CallDescriber,
    private readonly adapter: MethodContextAdapter,
    private readonly modules: ModulesContainer,
    private readonly reflector: Reflector,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {
    this.unregister = registerRunner(this);
  }

  run(instance: object, method: Function, args: unknown[]): Promise<unknown> {
    const original: Function = Reflect.getOwnMetadata(ORIGINAL_METHOD, method);
    const context = new ExecutionContextHost(args, instance.constructor as never, method);
    context.setType('method');
    const route = this.routeOf(method);
    if (route.name === undefined) {
      // Startup refuses such a method; one it never saw (a class loaded later) is refused here, never run unnamed.
      const where = `${instance.constructor.name}.${method.name}`;
      return Promise.reject(new TypeError(`${where} is @Idempotent() without name: it was not run (see startup)`));
    }
    const call: InterceptedCall = { context, route };
    const storeIf = route.storeIf ?? this.options.storeIf;
    return this.service.run(new MethodWork(call, this.adapter, this.describer, storeIf, instance, original));
  }

  /**
   * Whether the instance is this application's: a singleton or a static transient instance Nest made, or an instance
   * of a transient provider's class (`app.resolve()` makes those per context, out of sight of the wrapper).
   */
  adopt(instance: object): boolean {
    for (const module of this.modules.values()) {
      for (const wrapper of module.providers.values()) {
        if (wrapper.instance === instance) return true;
        const type = wrapper.metatype as Function | null;
        if (wrapper.isTransient && Object.getPrototypeOf(instance) === type?.prototype) return true;
      }
    }
    return false;
  }

  onApplicationShutdown(): void {
    this.unregister();
  }

  private routeOf(method: Function): IdempotentOptions {
    let route = this.routes.get(method);
    if (!route) {
      route = methodRoute(this.reflector.get(IdempotentRoute, method) as unknown as IdempotentMethodOptions);
      this.routes.set(method, route);
    }
    return route;
  }
}

/** One call of a provider method: the method itself, called on its instance with its arguments. */
class MethodWork extends AdaptedWork {
  constructor(
    call: InterceptedCall,
    adapter: MethodContextAdapter,
    describer: CallDescriber,
    storeIf: StoreIf,
    private readonly instance: object,
    private readonly original: Function,
  ) {
    super(call, adapter, describer, storeIf);
  }

  async execute(): Promise<unknown> {
    return this.original.apply(this.instance, this.call.context.getArgs());
  }
}
