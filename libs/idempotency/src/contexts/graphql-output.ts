import type { GraphQLObjectType, GraphQLOutputType, GraphQLResolveInfo } from 'graphql';
import { loadGraphql } from '../optional-peers';

/**
 * A resolver's result as it can be stored, read against its GraphQL type: every field of an object type that the
 * value holds (getters included) is read, leaves are serialized by their scalar or enum (a `Date` under `DateTime`
 * becomes its ISO text), lists and nested types the same way. The value's own JSON stays beside it, for field
 * resolvers that read properties the type does not expose. Fields the value does not hold (computed by a field
 * resolver) are left out: they resolve again on a replay, as for any read.
 */
export function storableOutput(value: unknown, info: GraphQLResolveInfo): unknown {
  return toStored(info.returnType, value, info, new Set());
}

/**
 * A stored result turned back into what the resolver would return, so that GraphQL answers it exactly as the first
 * time: each leaf is parsed by its scalar or enum (`DateTime` text becomes a `Date` again, an enum name its value).
 */
export function replayableOutput(stored: unknown, info: GraphQLResolveInfo): unknown {
  return fromStored(info.returnType, stored, info);
}

function toStored(type: GraphQLOutputType, value: unknown, info: GraphQLResolveInfo, path: Set<object>): unknown {
  const { isNonNullType, isListType, isLeafType, isObjectType, isAbstractType } = loadGraphql();
  if (value === null || value === undefined) return null;
  if (isNonNullType(type)) return toStored(type.ofType, value, info, path);
  if (isListType(type)) {
    const items =
      typeof (value as Iterable<unknown>)[Symbol.iterator] === 'function' ? [...(value as Iterable<unknown>)] : [value];
    return items.map((item) => toStored(type.ofType, item, info, path));
  }
  if (isLeafType(type)) return serialized(() => type.serialize(value));
  if (typeof value !== 'object' || path.has(value)) return null; // a cycle back to an object being stored
  const concrete = isObjectType(type) ? type : isAbstractType(type) ? concreteType(type.name, value, info) : undefined;
  if (!concrete) return plainJson(value);
  path.add(value);
  const stored: Record<string, unknown> = { ...(plainJson(value) as object) };
  if (!isObjectType(type)) stored.__typename = concrete.name;
  for (const field of Object.values(concrete.getFields())) {
    let property: unknown;
    try {
      property = (value as Record<string, unknown>)[field.name];
    } catch {
      continue; // a getter that throws answers an error on the first response too
    }
    if (property !== undefined && typeof property !== 'function')
      stored[field.name] = toStored(field.type, property, info, path);
  }
  path.delete(value);
  return stored;
}

function fromStored(type: GraphQLOutputType, stored: unknown, info: GraphQLResolveInfo): unknown {
  const { isNonNullType, isListType, isLeafType, isObjectType, isAbstractType } = loadGraphql();
  if (stored === null || stored === undefined) return stored;
  if (isNonNullType(type)) return fromStored(type.ofType, stored, info);
  if (isListType(type))
    return Array.isArray(stored) ? stored.map((item) => fromStored(type.ofType, item, info)) : stored;
  if (isLeafType(type)) {
    try {
      return type.parseValue(stored) ?? stored;
    } catch {
      return stored;
    }
  }
  if (typeof stored !== 'object') return stored;
  const typename = (stored as { __typename?: unknown }).__typename;
  const concrete = isObjectType(type)
    ? type
    : isAbstractType(type) && typeof typename === 'string'
      ? info.schema.getType(typename)
      : undefined;
  if (!isObjectType(concrete)) return stored;
  const value: Record<string, unknown> = { ...(stored as object) };
  for (const field of Object.values(concrete.getFields())) {
    if (field.name in value) value[field.name] = fromStored(field.type, value[field.name], info);
  }
  return value;
}

/** The object type a value of an interface or union is, as the schema tells it (resolveType, isTypeOf, __typename). */
function concreteType(abstractName: string, value: object, info: GraphQLResolveInfo): GraphQLObjectType | undefined {
  const { isAbstractType, isObjectType } = loadGraphql();
  const abstract = info.schema.getType(abstractName);
  if (!isAbstractType(abstract)) return undefined;
  let resolved: unknown;
  try {
    resolved = abstract.resolveType?.(value, undefined, info, abstract);
  } catch {
    resolved = undefined;
  }
  if (typeof resolved === 'string') resolved = info.schema.getType(resolved);
  if (isObjectType(resolved)) return resolved;
  const possible = info.schema.getPossibleTypes(abstract);
  const typename = (value as { __typename?: unknown }).__typename;
  return possible.find(
    (candidate) => candidate.name === typename || candidate.isTypeOf?.(value, undefined, info) === true,
  );
}

function serialized(serialize: () => unknown): unknown {
  try {
    return serialize();
  } catch {
    return null; // the first answer failed on it too
  }
}

/** The value as `JSON.stringify` sends it, or nothing when it cannot be (a BigInt, a cycle). */
function plainJson(value: unknown): unknown {
  try {
    return JSON.parse(JSON.stringify(value) ?? 'null');
  } catch {
    return {};
  }
}
