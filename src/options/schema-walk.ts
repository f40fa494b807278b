import type { z } from 'zod';

// Just enough of zod 4's `_zod.def` to map env variable names onto keys and to name valid keys in errors.
interface Def {
  readonly type: string;
  readonly innerType?: z.ZodType;
  readonly in?: z.ZodType;
  readonly shape?: Record<string, z.ZodType>;
  readonly catchall?: z.ZodType;
  readonly options?: readonly z.ZodType[];
}

function defOf(schema: z.ZodType): Def {
  return (schema as unknown as { _zod: { def: Def } })._zod.def;
}

const WRAPPERS = new Set(['default', 'prefault', 'optional', 'nullable', 'catch', 'readonly', 'nonoptional']);

/** Strips defaults, optionals and pipes (transforms) down to the schema that describes the input's shape. */
export function unwrap(schema: z.ZodType): z.ZodType {
  let current = schema;
  for (let depth = 0; depth < 32; depth++) {
    const def = defOf(current);
    if (WRAPPERS.has(def.type) && def.innerType) current = def.innerType;
    else if (def.type === 'pipe' && def.in) current = def.in;
    else break;
  }
  return current;
}

/**
 * The keys of an object schema, with whether it accepts other keys; undefined when it is not an object. A
 * union with one object (`tls = true` or `[repository.tls]`) has that object's keys.
 */
export function objectShape(
  schema: z.ZodType,
): { shape: Record<string, z.ZodType>; open: boolean } | undefined {
  const def = defOf(unwrap(schema));
  if (def.type === 'union' && def.options) {
    const tables = def.options.map(objectShape).filter((shape) => shape !== undefined);
    return tables.length === 1 ? tables[0] : undefined;
  }
  if (def.type !== 'object' || !def.shape) return undefined;
  const catchall = def.catchall ? defOf(def.catchall).type : undefined;
  // No catchall is zod's default "strip" mode: extra keys are dropped rather than rejected.
  return { shape: def.shape, open: catchall !== undefined && catchall !== 'never' };
}

/** The schema found by following `path` through object shapes, or undefined where the shape is unknown. */
export function schemaAt(schema: z.ZodType, path: readonly string[]): z.ZodType | undefined {
  let current: z.ZodType | undefined = schema;
  for (const step of path) {
    const object: ReturnType<typeof objectShape> = current && objectShape(current);
    // Own keys only: `constructor` or `toString` from an env name must not reach Object.prototype.
    current = object && Object.hasOwn(object.shape, step) ? object.shape[step] : undefined;
    if (!current) return undefined;
  }
  return current;
}

/** Key comparison for env names: case, `_` and `-` do not matter (`KEY_PREFIX` matches `keyPrefix`). */
export function looseKey(key: string): string {
  return key.toLowerCase().replace(/[_-]/g, '');
}

/** The schema key matching an env segment, if the shape has one. */
export function matchKey(shape: Record<string, unknown>, segment: string): string | undefined {
  const wanted = looseKey(segment);
  return Object.keys(shape).find((key) => looseKey(key) === wanted);
}

/** `KEY_PREFIX` → `keyPrefix`: the best guess for a key whose schema is not known yet. */
export function camelCase(segment: string): string {
  return segment.toLowerCase().replace(/[_-]+([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}
