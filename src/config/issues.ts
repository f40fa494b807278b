import type { z } from 'zod';
import { ConfigError } from '../errors.js';
import { objectShape, schemaAt } from './schema-walk.js';
import type { ConfigSourceInfo } from './sources.js';
import { sourceOf } from './sources.js';

/**
 * Turns a zod failure into one ConfigError naming the dotted key, where it was set (file:line, env variable
 * or flag), what was expected and the value given. The first issue is reported; the rest are counted.
 */
export function toConfigError(
  error: z.ZodError,
  options: {
    /** The input that failed, to quote the given value. */
    readonly input: unknown;
    /** The schema, to list valid keys for an unknown one. */
    readonly schema: z.ZodType;
    readonly info?: ConfigSourceInfo;
    /** Where the validated value sits in the whole config (`['repository']` for store options). */
    readonly prefix?: readonly string[];
  },
): ConfigError {
  const prefix = options.prefix ?? [];
  const issue = error.issues[0] as z.core.$ZodIssue;
  const at = issue.path.map(String);
  let path = [...prefix, ...at];
  let message = issue.message;
  if (issue.code === 'unrecognized_keys') {
    const unknown = issue.keys[0] as string;
    path = [...path, unknown];
    const shape = objectShape(schemaAt(options.schema, at) ?? options.schema);
    const valid = shape ? Object.keys(shape.shape) : [];
    message = `unknown key${valid.length ? `; valid keys here: ${valid.join(', ')}` : ''}`;
  } else {
    const given = valueAt(options.input, at);
    if (given !== undefined && !/\bgot\b/.test(message) && !message.includes(describe(given)))
      message += ` (got ${describe(given)})`;
  }
  const more = error.issues.length - 1;
  if (more > 0) message += ` (and ${more} more problem${more > 1 ? 's' : ''})`;
  const key = path.length ? path.join('.') : '(root)';
  const source = options.info ? sourceOf(options.info, path) : undefined;
  return new ConfigError(key, message, { cause: error, ...(source ? { source } : {}) });
}

function valueAt(value: unknown, path: readonly string[]): unknown {
  let current = value;
  for (const step of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[step];
  }
  return current;
}

/** A short rendering of a config value for messages. */
export function describe(value: unknown): string {
  const text =
    typeof value === 'object' && value !== null && !Array.isArray(value) && 'toISOString' in value
      ? String(value)
      : JSON.stringify(value);
  if (text === undefined) return String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
