import { readFile } from 'node:fs/promises';
import { parse, TomlError } from 'smol-toml';
import type { z } from 'zod';
import { ConfigError } from '../errors.js';
import { parseOptions } from '../options/issues.js';
import { schemaAt } from '../options/schema-walk.js';
import { type ConfigOverride, type ConfigSourceInfo, rememberSource } from '../options/sources.js';
import { coerceEnvValue, readEnvOverrides } from './env.js';
import { storeProblems } from './repository.js';

/** Options of {@link loadConfig}. */
export interface LoadConfigOptions {
  /** TOML file to read (the CLI's `--config`); falls back to the `<PREFIX>_CONFIG` variable, then to no file. */
  readonly path?: string;
  /** TOML text to use instead of reading a file; `path`, if given, only names it in errors. */
  readonly text?: string;
  /** Environment to read overrides from; defaults to `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Prefix of env variables: `IDEM` reads `IDEM_CONFIG` and `IDEM__SECTION__KEY`. Default `IDEM`. */
  readonly envPrefix?: string;
  /** Values that win over file and env (CLI flags). */
  readonly overrides?: readonly ConfigOverride[];
}

export const DEFAULT_ENV_PREFIX = 'IDEM';

/**
 * Loads config: a TOML file, then `<PREFIX>__A__B=value` env overrides, then explicit overrides, validated by
 * `schema`. Any problem is a ConfigError naming the source (`file:line`, `env VAR` or the flag) and the key.
 */
export async function loadConfig<S extends z.ZodType>(
  schema: S,
  options: LoadConfigOptions = {},
): Promise<z.output<S>> {
  const env = options.env ?? process.env;
  const prefix = options.envPrefix ?? DEFAULT_ENV_PREFIX;
  const fromEnv = env[`${prefix}_CONFIG`];
  const file = options.path ?? (fromEnv?.trim() ? fromEnv : undefined);
  const text = options.text ?? (file === undefined ? undefined : await readText(file));
  const name = file ?? (text === undefined ? undefined : '<config>');

  const fileData = text === undefined ? undefined : parseToml(text, name as string);
  const input = fileData === undefined ? {} : structuredClone(fileData);
  const envOverrides = readEnvOverrides(schema, env, prefix);
  for (const entry of envOverrides) {
    const value = coerceEnvValue(entry.raw, schemaAt(schema, entry.path));
    setPath(input, entry.path, value, `env ${entry.variable}`);
  }
  const overrides = options.overrides ?? [];
  for (const override of overrides) {
    if (override.value !== undefined) {
      setPath(input, override.key.split('.'), override.value, override.source ?? override.key);
    }
  }

  const info: ConfigSourceInfo = { file: name, text, fileData, env: envOverrides, overrides };
  // The store's own options are checked once the store is known (resolveRepository); when the rest fails, they
  // are checked now too, so that one run reports every problem of the file.
  const more = schema.safeParse(input).success ? undefined : await storeProblems(schema, input, info);
  const config = parseOptions(schema, input, { kind: 'config', info }, more);
  rememberSource(config, info);
  return config;
}

/** Parses TOML into plain objects; a syntax error names `file:line:column`. */
export function parseToml(text: string, name: string): Record<string, unknown> {
  try {
    return plain(parse(text)) as Record<string, unknown>;
  } catch (error) {
    if (error instanceof TomlError) {
      const reason = error.message.split('\n')[0]?.replace(/^Invalid TOML document:\s*/, '') ?? 'invalid';
      throw new ConfigError('syntax', `invalid TOML: ${reason}\n${error.codeblock}`, {
        source: `${name}:${error.line}:${error.column}`,
        cause: error,
      });
    }
    throw error;
  }
}

async function readText(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new ConfigError('config', `cannot read the config file (${reason})`, {
      source: file,
      cause: error,
    });
  }
}

// smol-toml builds null-prototype objects; plain ones print and compare as users expect.
function plain(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(plain);
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  }
  return value;
}

function setPath(target: Record<string, unknown>, path: readonly string[], value: unknown, source: string) {
  let current = target;
  for (const step of path.slice(0, -1)) {
    // Own keys only: an env name such as IDEM__CONSTRUCTOR__NAME must not walk into Object.prototype.
    const next = Object.hasOwn(current, step) ? current[step] : undefined;
    if (next === undefined) current[step] = {};
    else if (next === null || typeof next !== 'object' || Array.isArray(next)) {
      throw new ConfigError(path.join('.'), `cannot set a key inside ${step}, which is not a table`, {
        source,
      });
    }
    current = current[step] as Record<string, unknown>;
  }
  current[path[path.length - 1] as string] = value;
}
