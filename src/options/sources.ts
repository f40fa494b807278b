import { locateKey } from './locate.js';
import { looseKey } from './schema-walk.js';

/** One `IDEM__SECTION__KEY=value` override, mapped onto the schema's keys. */
export interface EnvOverride {
  /** The variable's name, used as the error source. */
  readonly variable: string;
  /** Schema keys (`['consumer', 'ttl']`); a guessed camelCase key where the schema does not know the shape. */
  readonly path: readonly string[];
  readonly raw: string;
  /** False when the schema did not know the key; the store schema maps it later (see resolveRepository). */
  readonly known: boolean;
}

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
  /** The file as parsed, before env and overrides, so callers never read or parse it again. */
  readonly fileData?: Readonly<Record<string, unknown>>;
  readonly env: readonly EnvOverride[];
  readonly overrides: readonly ConfigOverride[];
}

const infoByConfig = new WeakMap<object, ConfigSourceInfo>();

export function rememberSource(config: unknown, info: ConfigSourceInfo): void {
  if (config !== null && typeof config === 'object') infoByConfig.set(config, info);
}

/** Where a config returned by loadConfig came from, if it did. */
export function configSource(config: object): ConfigSourceInfo | undefined {
  return infoByConfig.get(config);
}

/**
 * Names where the value at `path` was set: the flag, the env variable, or `file:line`. A key that only an env
 * variable or flag below it created (`IDEM__CONSUMR__TTL` makes an unknown `consumr`) is named by that variable.
 */
export function sourceOf(info: ConfigSourceInfo, path: readonly string[]): string | undefined {
  // Env keys are matched loosely (case, `_`), and store keys are only known after loading, so compare loosely.
  const prefixOf = (shorter: readonly string[], longer: readonly string[]) =>
    shorter.length <= longer.length &&
    shorter.every((step, i) => looseKey(step) === looseKey(longer[i] as string));
  // The flag, else the env variable, that set a key `within` accepts (of several, the last given wins).
  const setBy = (within: (setAt: readonly string[]) => boolean): string | undefined => {
    const override = info.overrides.findLast((o) => within(o.key.split('.')));
    if (override) return override.source ?? `override ${override.key}`;
    const env = info.env.findLast((e) => within(e.path));
    return env && `env ${env.variable}`;
  };

  const covering = setBy((setAt) => prefixOf(setAt, path));
  if (covering !== undefined) return covering;
  const exact = info.text === undefined ? undefined : locateKey(info.text, path);
  if (exact !== undefined) return `${info.file ?? '<config>'}:${exact}`;
  // A key nobody set or only a variable made: name the nearest enclosing table the file, env or a flag set.
  for (let n = path.length; n > 0; n--) {
    const table = path.slice(0, n);
    const line = n < path.length && info.text !== undefined ? locateKey(info.text, table) : undefined;
    if (line !== undefined) return `${info.file ?? '<config>'}:${line}`;
    const below = setBy((setAt) => prefixOf(table, setAt));
    if (below !== undefined) return below;
  }
  return info.file;
}
