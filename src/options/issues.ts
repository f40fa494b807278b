import type { z } from 'zod';
import { ConfigError } from '../errors.js';
import { describeValue } from './redact.js';
import { objectShape, schemaAt } from './schema-walk.js';
import { type ConfigSourceInfo, sourceOf } from './sources.js';

// The one place where options become errors: config files, env variables, CLI flags and constructor options
// all pass through parseOptions/optionError, so every message names the setting, where it was set, what is
// expected in plain words, and the value given (secrets redacted).

/** Where options came from, so an error can say where to fix them. */
export type OptionsOrigin =
  | {
      /** A config loaded by loadConfig: errors name `file:line`, `env VAR` or the flag that set the key. */
      readonly kind: 'config';
      readonly info?: ConfigSourceInfo | undefined;
      /** Where the validated value sits in the whole config (`['repository']` for store options). */
      readonly prefix?: readonly string[];
    }
  | {
      /** Options passed in code: errors read `option ttlMs of new IdempotentConsumer(...)`. */
      readonly kind: 'code';
      /** The call that took the options, e.g. `new MemoryRepository(...)` or `RedisRepository.open(...)`. */
      readonly owner: string;
      /** The config table these options correspond to (`['repository']`), used for `ConfigError.key` only. */
      readonly prefix?: readonly string[];
    };

/**
 * Validates `input` with `schema`; the first problem becomes a {@link ConfigError} (see {@link toConfigError}).
 * Built-in checks are worded plainly ("is required", "must be one of ..."); a schema's own messages are kept.
 */
export function parseOptions<S extends z.ZodType>(
  schema: S,
  input: unknown,
  origin: OptionsOrigin,
): z.output<S> {
  const result = schema.safeParse(input, { error: plainWords(origin.kind === 'code') });
  if (result.success) return result.data;
  throw toConfigError(result.error, { input, schema, origin });
}

/**
 * Turns a zod failure into one ConfigError naming the dotted key, where it was set, what was expected and
 * the value given. The first issue is reported; the rest are counted. Prefer {@link parseOptions}, which also
 * words zod's built-in checks plainly.
 */
export function toConfigError(
  error: z.ZodError,
  context: {
    /** The input that failed, to quote the given value. */
    readonly input: unknown;
    /** The schema, to list valid keys for an unknown one. */
    readonly schema: z.ZodType;
    readonly origin: OptionsOrigin;
  },
): ConfigError {
  const issue = error.issues[0] as z.core.$ZodIssue;
  const at = issue.path.map(String);
  let problem: string;
  let path = at;
  let value: { readonly given: unknown } | undefined;
  if (issue.code === 'unrecognized_keys') {
    path = [...at, String(issue.keys[0])];
    const shape = objectShape(schemaAt(context.schema, at) ?? context.schema);
    const valid = shape ? Object.keys(shape.shape) : [];
    const noun = context.origin.kind === 'code' ? 'option' : 'key';
    const here = context.origin.kind === 'code' ? '' : ' here';
    problem = `unknown ${noun}${valid.length ? `; valid ${noun}s${here}: ${valid.join(', ')}` : ''}`;
  } else {
    problem = issue.message;
    const given = valueAt(context.input, at);
    // A refinement about a whole table can say the value adds nothing (`params: { quoteValue: false }`).
    const quote = !(issue.code === 'custom' && issue.params?.quoteValue === false);
    if (given !== undefined && quote) value = { given };
  }
  const more = error.issues.length - 1;
  return optionError(path, problem, context.origin, { ...value, cause: error, more });
}

/**
 * The ConfigError for a problem with the option at `path` (relative to the origin's prefix): every option
 * error in the library is built here. With `given`, the value is quoted (`, got "x"`), secrets redacted;
 * `more` counts further problems not shown.
 */
export function optionError(
  path: readonly string[],
  problem: string,
  origin: OptionsOrigin,
  extra: { readonly given?: unknown; readonly cause?: unknown; readonly more?: number } = {},
): ConfigError {
  const full = [...(origin.prefix ?? []), ...path];
  const key = full.length ? full.join('.') : '(root)';
  let message = 'given' in extra ? `${problem}, got ${describeValue(extra.given, full)}` : problem;
  const more = extra.more ?? 0;
  if (more > 0) message += ` (and ${more} more problem${more > 1 ? 's' : ''})`;
  const cause = extra.cause === undefined ? {} : { cause: extra.cause };
  if (origin.kind === 'code') {
    const label = path.length ? `option ${path.join('.')} of ${origin.owner}` : `options of ${origin.owner}`;
    return new ConfigError(key, message, { ...cause, label });
  }
  const source = origin.info ? sourceOf(origin.info, full) : undefined;
  return new ConfigError(key, message, { ...cause, ...(source ? { source } : {}) });
}

function valueAt(value: unknown, path: readonly string[]): unknown {
  let current = value;
  for (const step of path) {
    if (current === null || typeof current !== 'object' || !Object.hasOwn(current, step)) return undefined;
    current = (current as Record<string, unknown>)[step];
  }
  return current;
}

/** zod's built-in checks in plain words; a schema's own message wins over these (zod's precedence). */
function plainWords(inCode: boolean): z.core.$ZodErrorMap {
  return (issue) => {
    switch (issue.code) {
      case 'invalid_type':
        if (issue.input === undefined) return 'is required';
        return `must be ${typeNoun(issue.expected, issue.inst, inCode)}`;
      case 'too_small':
      case 'too_big':
        return sizeWords(issue);
      case 'invalid_value':
        return issue.values.length === 1
          ? `must be ${literal(issue.values[0])}`
          : `must be one of ${issue.values.map(literal).join(', ')}`;
      case 'invalid_format':
        if (issue.format === 'url') return 'must be a URL';
        if (issue.format === 'regex' && 'pattern' in issue) return `must match ${String(issue.pattern)}`;
        return `must be a valid ${issue.format}`;
      case 'invalid_union':
        if (issue.input === undefined) return 'is required';
        return unionWords(issue.errors, inCode);
      case 'not_multiple_of':
        return `must be a multiple of ${String(issue.divisor)}`;
      case 'unrecognized_keys':
        return 'unknown key';
      case 'invalid_key':
        return 'has an invalid key';
      case 'invalid_element':
        return 'has an invalid entry';
      default:
        return 'is invalid';
    }
  };
}

const INTEGER_FORMATS = new Set(['safeint', 'int32', 'uint32']);

function typeNoun(expected: string, inst: unknown, inCode: boolean): string {
  switch (expected) {
    case 'number':
      return isInteger(inst) ? 'a whole number' : 'a number';
    case 'int':
      return 'a whole number';
    case 'string':
      return 'a string';
    case 'boolean':
      return 'true or false';
    case 'array':
      return 'a list';
    case 'object':
    case 'record':
      return inCode ? 'an object' : 'a table';
    case 'function':
      return 'a function';
    default:
      return `a ${expected}`;
  }
}

// A number schema with `.int()` carries a `number_format` check; the issue only says "number".
function isInteger(inst: unknown): boolean {
  const checks = (inst as { _zod?: { def?: { checks?: { _zod?: { def?: { format?: string } } }[] } } })?._zod
    ?.def?.checks;
  return (checks ?? []).some((check) => INTEGER_FORMATS.has(check._zod?.def?.format ?? ''));
}

function sizeWords(issue: {
  code: 'too_small' | 'too_big';
  origin: string;
  inclusive?: boolean;
  minimum?: unknown;
  maximum?: unknown;
}): string {
  const small = issue.code === 'too_small';
  const limit = Number(small ? issue.minimum : issue.maximum);
  if (issue.origin === 'number' || issue.origin === 'bigint' || issue.origin === 'date') {
    if (issue.inclusive === false) return `must be ${small ? 'greater' : 'less'} than ${limit}`;
    return `must be at ${small ? 'least' : 'most'} ${limit}`;
  }
  const unit = issue.origin === 'string' ? 'character' : 'entr';
  const plural = (n: number) =>
    unit === 'entr' ? (n === 1 ? 'entry' : 'entries') : `${unit}${n === 1 ? '' : 's'}`;
  if (small && limit === 1) return 'must not be empty';
  return `must have at ${small ? 'least' : 'most'} ${limit} ${plural(limit)}`;
}

function unionWords(branches: readonly (readonly z.core.$ZodIssue[])[], inCode: boolean): string {
  const nouns = new Set<string>();
  for (const issues of branches) {
    const first = issues[0];
    if (first?.code !== 'invalid_type' || first.path.length > 0) return 'does not match any accepted form';
    nouns.add(typeNoun(first.expected, undefined, inCode));
  }
  const list = [...nouns];
  return `must be ${list.length > 1 ? `${list.slice(0, -1).join(', ')} or ${list.at(-1)}` : list[0]}`;
}

function literal(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}
