import { fileURLToPath } from 'node:url';
import { ConfigError, errorMessage } from '../errors.js';
import type { RepositoryType } from '../repositories/registry.js';
import { redactUrl } from '../util/redact-text.js';
import { type CliConfig, dedupDefaults } from './options.js';

/** What a `--store` URL scheme selects: a store, and the `[repository]` keys the URL sets on it. */
export interface StoreScheme {
  readonly type: RepositoryType;
  /** The store's keys for this URL (besides `type`). */
  readonly table: (url: string) => Record<string, unknown>;
  /** Keys of a same-store config table that the URL replaces; its other keys (a key prefix, TLS) apply. */
  readonly replaces: readonly string[];
}

const asUrl = (url: string) => ({ url });

/**
 * Every URL scheme a store answers to in `--store`. A value with a scheme selects that store, or is refused
 * naming these; it never becomes a directory. A store with a schema also needs its entry in migrate.ts.
 */
export const storeSchemes: Readonly<Record<string, StoreScheme>> = {
  postgres: { type: 'postgres', table: asUrl, replaces: ['url'] },
  postgresql: { type: 'postgres', table: asUrl, replaces: ['url'] },
  mysql: { type: 'mysql', table: asUrl, replaces: ['url'] },
  mariadb: { type: 'mysql', table: asUrl, replaces: ['url'] },
  redis: { type: 'redis', table: asUrl, replaces: ['url', 'host', 'port', 'cluster'] },
  rediss: { type: 'redis', table: asUrl, replaces: ['url', 'host', 'port', 'cluster'] },
  file: { type: 'rocksdb', table: (url) => ({ path: fileURLToPath(url) }), replaces: ['path'] },
};

// Two characters at least, so a Windows drive (`C:\ids`) stays a path.
const SCHEME = /^([a-z][a-z0-9+.-]+):/i;

/** The scheme of a `--store` value (`redis` for `redis://…`), or undefined for a path; and its entry, if known. */
function schemeOf(value: string): { name: string | undefined; entry: StoreScheme | undefined } {
  const name = SCHEME.exec(value)?.[1]?.toLowerCase();
  return {
    name,
    entry: name !== undefined && Object.hasOwn(storeSchemes, name) ? storeSchemes[name] : undefined,
  };
}

/** The known schemes as they are written, `postgres://, …`, for messages. */
export function knownSchemes(filter: (scheme: StoreScheme) => boolean = () => true): string {
  return Object.entries(storeSchemes)
    .filter(([, scheme]) => filter(scheme))
    .map(([name]) => `${name}://`)
    .join(', ');
}

/** The store a `--store` value names when it is a URL of a known scheme; undefined for anything else. */
export function storeOfUrl(value: string): { type: RepositoryType; url: string } | undefined {
  const { entry } = schemeOf(value);
  return entry === undefined ? undefined : { type: entry.type, url: value };
}

/** The `[repository]` table a `--store` URL makes over the configured one; undefined when it is a path. */
export function repositoryFromStoreUrl(
  value: string,
  configured: Readonly<Record<string, unknown>>,
): Record<string, unknown> | undefined {
  const { name: scheme, entry } = schemeOf(value);
  if (scheme === undefined) return undefined;
  if (entry === undefined) {
    throw new ConfigError(
      'repository',
      `${JSON.stringify(redactUrl(value))}: unknown store URL scheme "${scheme}:"; known: ${knownSchemes()}, ` +
        `or a directory (one whose name has a colon: --store ./${redactUrl(value)})`,
      { label: '--store' },
    );
  }
  const kept: Record<string, unknown> = {};
  if (configured.type === entry.type) {
    for (const [key, v] of Object.entries(configured)) if (!entry.replaces.includes(key)) kept[key] = v;
  }
  let table: Record<string, unknown>;
  try {
    table = entry.table(value);
  } catch (error) {
    throw new ConfigError('repository', `${JSON.stringify(redactUrl(value))}: ${errorMessage(error)}`, {
      label: '--store',
    });
  }
  return { ...kept, type: entry.type, ...table };
}

/** How `--store` or the config chooses the store: a URL by its scheme, a path (or none) for RocksDB. */
export function chooseStore(config: CliConfig, storeFlag: string | undefined): void {
  const section = config.repository as Record<string, unknown> & { type: string };
  const fromUrl = storeFlag === undefined ? undefined : repositoryFromStoreUrl(storeFlag, section);
  if (fromUrl !== undefined) {
    for (const key of Object.keys(section)) delete section[key];
    Object.assign(section, fromUrl);
    if (section.type === 'rocksdb') section.memtableMb ??= dedupDefaults.memtableMb;
    return;
  }
  if (storeFlag === dedupDefaults.memoryStore) {
    // A one-shot run: whatever store the config names, nothing is kept after it.
    for (const key of Object.keys(section)) delete section[key];
    section.type = 'memory';
    section.maxEntries = dedupDefaults.memoryMaxEntries;
    return;
  }
  if (section.type === 'memory' && storeFlag === undefined) {
    // The memory store's own cap evicts the oldest ids, which would let their repeats through unnoticed.
    section.maxEntries ??= dedupDefaults.memoryMaxEntries;
    return;
  }
  if (section.type !== 'rocksdb') {
    if (storeFlag !== undefined) {
      throw new ConfigError(
        'repository.type',
        `--store needs the rocksdb store, but the config selects ${section.type}`,
        { source: '--store' },
      );
    }
    return;
  }
  if (storeFlag !== undefined) section.path = storeFlag;
  else section.path ??= dedupDefaults.storeDir;
  section.memtableMb ??= dedupDefaults.memtableMb;
}

/** Where seen ids are kept, for the summary: a user should never wonder which store a run marked. */
export function describeStore(config: CliConfig): string {
  const section = config.repository as Record<string, unknown> & { type: string };
  if (section.type === 'memory') return 'store in memory (nothing kept after this run)';
  if (section.type === 'rocksdb') return `store ${String(section.path)} (RocksDB)`;
  return typeof section.url === 'string'
    ? `store ${section.type} at ${redactUrl(section.url)}`
    : `store ${section.type}`;
}
