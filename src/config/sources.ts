import type { EnvOverride } from './env.js';
import { locateKey } from './locate.js';
import { looseKey } from './schema-walk.js';

/** A value set by the caller (CLI flag) that wins over file and env. */
export interface ConfigOverride {
  /** Dotted key, e.g. `consumer.ttl`. */
  readonly key: string;
  readonly value: unknown;
  /** How to name it in errors, e.g. `--ttl`. */
  readonly source?: string;
}

/** Where a loaded config came from, kept so later validation (store options) can name file lines and env vars. */
export interface ConfigSourceInfo {
  /** The file name as given (`--config`, `IDEM_CONFIG` or the `path` option). */
  readonly file?: string;
  readonly text?: string;
  readonly env: readonly EnvOverride[];
  readonly overrides: readonly ConfigOverride[];
}

const infoByConfig = new WeakMap<object, ConfigSourceInfo>();

/** Remembers where `config` came from. */
export function rememberSource(config: unknown, info: ConfigSourceInfo): void {
  if (config !== null && typeof config === 'object') infoByConfig.set(config, info);
}

/** Where a config returned by loadConfig came from, if it did. */
export function configSource(config: object): ConfigSourceInfo | undefined {
  return infoByConfig.get(config);
}

/** Names where the value at `path` was set: the flag, the env variable, or `file:line`. */
export function sourceOf(info: ConfigSourceInfo, path: readonly string[]): string | undefined {
  const covers = (setAt: readonly string[]) =>
    setAt.length <= path.length && setAt.every((step, i) => step === path[i]);
  const override = [...info.overrides].reverse().find((o) => covers(o.key.split('.')));
  if (override) return override.source ?? `override ${override.key}`;
  // Env keys are matched loosely (case, `_`), and store keys are only known after loading, so compare loosely.
  const loose = path.map(looseKey);
  const env = [...info.env]
    .reverse()
    .find((e) => e.path.length <= path.length && e.path.every((step, i) => looseKey(step) === loose[i]));
  if (env) return `env ${env.variable}`;
  if (info.file === undefined) return undefined;
  // A missing key has no line of its own: name the closest enclosing table instead.
  let line: number | undefined;
  for (let n = path.length; info.text !== undefined && line === undefined && n > 0; n--) {
    line = locateKey(info.text, path.slice(0, n));
  }
  return line === undefined ? info.file : `${info.file}:${line}`;
}
