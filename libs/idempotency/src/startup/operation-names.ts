import { RequestMethod } from '@nestjs/common';
import { MCP_TOOL_METADATA } from '../contexts/mcp-results';
import { readRouteTemplate } from '../contexts/route-identity';
import { isGraphqlMutation } from '../decorators/idempotent-route.metadata';
import { checkOperationFits, PROGRAMMATIC_PREFIXES } from '../keys/record-key';
import { MESSAGE_PATTERN_METADATA, METHOD_METADATA, VERSION_METADATA } from '../nest-internals';
import { IdempotentOptions } from '../options/idempotency.options';

/** `@nestjs/graphql`'s field name of a resolver method (`@Mutation('pay')`), read without importing it. */
const GRAPHQL_RESOLVER_NAME_METADATA = 'graphql:resolver_name';

/**
 * One protected operation of the application: the class of the provider or controller that reaches it, the method
 * (its own, or one it inherits or overrides) under its property name, and where, for errors.
 */
interface Declared {
  type: Function;
  property: string;
  method: Function;
  where: string;
  options: IdempotentOptions;
}

/**
 * The operations an application protects, by the name their record keys start with, checked once at startup: every
 * operation has one name of its own. Two operations of one name would share records (one would answer with the
 * other's result and never run); an operation's identity is a name the application wrote (a route, a pattern, a tool,
 * a `name`), never a class's runtime name, which `mixin()`, bundlers and subclasses change.
 */
export class OperationNames {
  private readonly declared = new Map<string, Declared[]>();

  constructor(private readonly layout: { sortKey?: string; keyPrefix: string }) {}

  /**
   * Adds a protected method that instances of `type` reach as `property` (an override's `super` call reaches the
   * method it overrides); a problem with its own name (reserved, too long) is thrown.
   */
  add(type: Function, property: string, method: Function, options: IdempotentOptions, where: string): void {
    const { name } = options;
    const prefix = name === undefined ? undefined : PROGRAMMATIC_PREFIXES.find((each) => name.startsWith(each));
    if (prefix !== undefined) {
      throw new TypeError(
        `${where}: name may not start with '${prefix}': IdempotencyService.execute() and one-time tokens write ` +
          `operations that start so, and a declared operation must never share their records. Choose another name.`,
      );
    }
    const operation = declaredOperation(type, method, options);
    checkOperationFits(operation, name === undefined ? 'the route' : 'name', where, this.layout);
    const entries = this.declared.get(operation) ?? [];
    if (!entries.some((entry) => entry.type === type && entry.method === method)) {
      entries.push({ type, property, method, where, options });
    }
    this.declared.set(operation, entries);
  }

  /** The protected HTTP route named `operation` (its route, or its `name`), when there is exactly one. */
  httpRoute(operation: string): IdempotentOptions | undefined {
    const entries = this.declared.get(operation) ?? [];
    const [only] = entries;
    return entries.length === 1 && Reflect.hasMetadata(METHOD_METADATA, only.method) ? only.options : undefined;
  }

  /** The names of every protected HTTP route, for an error that names what exists. */
  httpRoutes(): string[] {
    return [...this.declared]
      .filter(([, entries]) => entries.some((entry) => Reflect.hasMetadata(METHOD_METADATA, entry.method)))
      .map(([operation]) => operation);
  }

  /** Every operation name written by more than one method, each as one problem naming them all. */
  problems(): string[] {
    return [...this.declared].flatMap(([operation, entries]) =>
      entries.length < 2 ? [] : [sharedName(operation, entries)],
    );
  }
}

function sharedName(operation: string, entries: Declared[]): string {
  const where = entries.map((entry) => entry.where).join(', ');
  const overrides = entries.some((a) => entries.some((b) => a !== b && a.type === b.type && a.property === b.property));
  const why = overrides
    ? "a method and the one it overrides, both protected under one name: the override's call of super would wait on " +
      'its own claim for ever. Give each its own name, or protect only one of them'
    : 'their calls would share records, so one would answer with the other’s result and never run. Give each its own ' +
      'name (a class made by mixin(), or one shared by subclasses, needs a name per class: name each subclass’s own ' +
      'method, not the shared one)';
  return `${where}: two protected operations named ${JSON.stringify(operation)}; ${why}`;
}

/**
 * The operation a handler's record keys start with, as its adapter writes it: the `name`, else an HTTP route's method
 * and template (its declared versions apart), a message handler's pattern, an MCP tool's name, a GraphQL mutation's
 * field. A provider method has a `name` (required at startup).
 */
export function declaredOperation(type: Function, method: Function, options: IdempotentOptions): string {
  if (options.name !== undefined) return options.name;
  const tool = Reflect.getMetadata(MCP_TOOL_METADATA, method) as { name?: string } | undefined;
  if (tool) return `MCP tool ${tool.name ?? method.name}`;
  if (Reflect.hasMetadata(MESSAGE_PATTERN_METADATA, method)) {
    return `RPC ${JSON.stringify(Reflect.getMetadata(MESSAGE_PATTERN_METADATA, method))}`;
  }
  if (isGraphqlMutation(method)) {
    return `GraphQL Mutation.${Reflect.getMetadata(GRAPHQL_RESOLVER_NAME_METADATA, method) ?? method.name}`;
  }
  const requestMethod = RequestMethod[Reflect.getMetadata(METHOD_METADATA, method) as number] ?? 'ALL';
  const version = Reflect.getMetadata(VERSION_METADATA, method) ?? Reflect.getMetadata(VERSION_METADATA, type);
  const versions = version === undefined ? '' : ` version=${[version].flat().map(String).join('|')}`;
  return `${requestMethod} ${readRouteTemplate(type, method)}${versions}`;
}
