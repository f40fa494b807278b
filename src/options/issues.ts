import type { z } from 'zod';
import { ConfigError } from '../errors.js';
import { likelyMeant } from './closest.js';
import { describeValue } from './redact.js';
import { objectShape, schemaAt } from './schema-walk.js';
import { type ConfigSourceInfo, sourceOf } from './sources.js';

// The one place where options become errors (config files, env variables, flags, constructor options): every
// message names the setting, where it was set, what is expected, and the value given (secrets redacted).

/** Where options came from, so an error can say where to fix them. */
export type OptionsOrigin = (
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
    }
) & {
  /** Top-level keys valid beside the schema's own, checked elsewhere (`type` beside a store's options). */
  readonly siblingKeys?: readonly string[];
  /** Said instead of "valid keys here" before an unknown key's list (`repository.type is not set, so ...`). */
  readonly validKeysNote?: string;
};

/**
 * Validates `input` with `schema`; the problems become one {@link ConfigError} (see {@link toConfigError}).
 * Built-in checks are worded plainly ("is required", "must be one of ..."); a schema's own messages are kept.
 */
export function parseOptions<S extends z.ZodType>(
  schema: S,
  input: unknown,
  origin: OptionsOrigin,
  more?: string,
): z.output<S> {
  const result = schema.safeParse(input, { error: plainWords(origin.kind === 'code') });
  if (result.success) return result.data;
  throw toConfigError(result.error, { input, schema, origin, more });
}

/**
 * One ConfigError for a zod failure: its `key` and first line are the first problem's, each further problem
 * follows on a line of its own. Prefer {@link parseOptions}, which also words zod's built-in checks plainly.
 */
export function toConfigError(error: z.ZodError, context: FailedParse): ConfigError {
  const problems = error.issues.flatMap((issue) => problemsOf(issue as z.core.$ZodIssue, context));
  const [head, ...rest] = problems;
  const more = context.more === undefined ? '' : `\n  ${context.more}`;
  if (head === undefined) {
    return optionError([], 'is invalid', context.origin, { cause: error, after: more });
  }
  const after =
    rest.map((p) => `\n  ${optionError(p.path, p.problem, context.origin, p.extra).message}`).join('') + more;
  return optionError(head.path, head.problem, context.origin, { ...head.extra, cause: error, after });
}

/** What {@link toConfigError} words a zod failure from. */
interface FailedParse {
  /** The input that failed, to quote the given value. */
  readonly input: unknown;
  /** The schema, to list valid keys for an unknown one. */
  readonly schema: z.ZodType;
  readonly origin: OptionsOrigin;
  /** Problems found apart (a store's options), as a ConfigError's message: listed after these. */
  readonly more?: string;
}

/** The problems of one zod issue (one per unknown key, else one), their paths below the origin's prefix. */
function problemsOf(issue: z.core.$ZodIssue, context: FailedParse) {
  const at = issue.path.map(String);
  if (issue.code === 'unrecognized_keys') {
    const shape = objectShape(schemaAt(context.schema, at) ?? context.schema);
    const siblings = at.length === 0 ? (context.origin.siblingKeys ?? []) : [];
    const valid = [...siblings, ...(shape ? Object.keys(shape.shape) : [])];
    return issue.keys.map((key) => ({
      path: [...at, String(key)],
      problem: unknownKeyProblem(String(key), valid, context.origin, at.length === 0),
      extra: {},
    }));
  }
  const given = valueAt(context.input, at);
  // A refinement about a whole table can say the value adds nothing (`params: { quoteValue: false }`).
  const quote = !(issue.code === 'custom' && issue.params?.quoteValue === false);
  return [{ path: at, problem: issue.message, extra: given !== undefined && quote ? { given } : {} }];
}

/** `unknown key (did you mean type?); valid keys here: ...`, the suggestion only when one is near. */
function unknownKeyProblem(
  key: string,
  valid: readonly string[],
  origin: OptionsOrigin,
  top: boolean,
): string {
  const noun = origin.kind === 'code' ? 'option' : 'key';
  const meant = likelyMeant(key, valid);
  let problem = `unknown ${noun}${meant === undefined ? '' : ` (did you mean ${meant}?)`}`;
  if (valid.length === 0) return problem;
  const note = top ? origin.validKeysNote : undefined;
  const here = origin.kind === 'code' ? '' : ' here';
  problem += note === undefined ? `; valid ${noun}s${here}: ` : `; ${note}: `;
  return problem + valid.join(', ');
}

/**
 * The ConfigError for a problem with the option at `path` (below the origin's prefix); every option error is
 * built here. `given` is quoted (`, got "x"`), secrets redacted; `after` follows the message.
 */
export function optionError(
  path: readonly string[],
  problem: string,
  origin: OptionsOrigin,
  extra: { readonly given?: unknown; readonly cause?: unknown; readonly after?: string } = {},
): ConfigError {
  const full = [...(origin.prefix ?? []), ...path];
  const key = full.length ? full.join('.') : '(root)';
  let message = 'given' in extra ? `${problem}, got ${describeValue(extra.given, full)}` : problem;
  message += extra.after ?? '';
  const { cause } = extra;
  if (origin.kind === 'code') {
    const label = path.length ? `option ${path.join('.')} of ${origin.owner}` : `options of ${origin.owner}`;
    return new ConfigError(key, message, { cause, label });
  }
  return new ConfigError(key, message, { cause, source: origin.info && sourceOf(origin.info, full) });
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

const TYPE_NOUNS = new Map([
  ['int', 'a whole number'],
  ['boolean', 'true or false'],
  ['array', 'a list'],
]);

function typeNoun(expected: string, inst: unknown, inCode: boolean): string {
  if (expected === 'number') return isInteger(inst) ? 'a whole number' : 'a number';
  if (expected === 'object' || expected === 'record') return inCode ? 'an object' : 'a table';
  return TYPE_NOUNS.get(expected) ?? `a ${expected}`;
}

// A number schema with `.int()` carries a `number_format` check; the issue only says "number".
function isInteger(inst: unknown): boolean {
  const checks = (inst as { _zod?: { def?: { checks?: { _zod?: { def?: { format?: string } } }[] } } })?._zod
    ?.def?.checks;
  return (checks ?? []).some((check) => INTEGER_FORMATS.has(check._zod?.def?.format ?? ''));
}

function sizeWords(issue: z.core.$ZodRawIssue<z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig>): string {
  const small = issue.code === 'too_small';
  const limit = Number(small ? issue.minimum : issue.maximum);
  if (issue.origin === 'number' || issue.origin === 'bigint' || issue.origin === 'date') {
    if (issue.inclusive === false) return `must be ${small ? 'greater' : 'less'} than ${limit}`;
    return `must be at ${small ? 'least' : 'most'} ${limit}`;
  }
  if (small && limit === 1) return 'must not be empty';
  const unit = issue.origin === 'string' ? ['character', 'characters'] : ['entry', 'entries'];
  return `must have at ${small ? 'least' : 'most'} ${limit} ${unit[limit === 1 ? 0 : 1]}`;
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
