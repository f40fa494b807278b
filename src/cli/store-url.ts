import { fileURLToPath } from 'node:url';
import { ConfigError, errorMessage } from '../errors.js';
import type { RepositoryType } from '../repositories/registry.js';
import { redactUrl } from '../util/redact-text.js';
import { type CliConfig, dedupDefaults } from './options.js';

/**
 * What a `--store` URL scheme selects: a store, and the keys of a same-store config table that the URL replaces
 * (its other keys, a key prefix or TLS, apply). The URL becomes the store's `url`, a file URL its `path`.
 */
export interface StoreScheme {
  readonly type: RepositoryType;
  readonly replaces: readonly string[];
}

/**
 * Every URL scheme a store answers to in `--store`. A value with a scheme selects that store, or is refused
 * naming these; it never becomes a directory. A store with a schema also needs its entry in migrate.ts.
 */
export const storeSchemes: Readonly<Record<string, StoreScheme>> = {
  postgres: { type: 'postgres', replaces: ['url'] },
  postgresql: { type: 'postgres', replaces: ['url'] },
  mysql: { type: 'mysql', replaces: ['url'] },
  mariadb: { type: 'mysql', replaces: ['url'] },
  redis: { type: 'redis', replaces: ['url', 'host', 'port', 'cluster'] },
  rediss: { type: 'redis', replaces: ['url', 'host', 'port', 'cluster'] },
  file: { type: 'rocksdb', replaces: ['path'] },
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
  if (entry.type !== 'rocksdb') return { ...kept, type: entry.type, url: value };
  try {
    return { ...kept, type: entry.type, path: fileURLToPath(value) };
  } catch (error) {
    throw new ConfigError('repository', `${JSON.stringify(redactUrl(value))}: ${errorMessage(error)}`, {
      label: '--store',
    });
  }
}

/** How `--store` or the config chooses the store: a URL by its scheme, a path (or none) for RocksDB. */
export function chooseStore(config: CliConfig, storeFlag: string | undefined): void {
  const section = config.repository as Record<string, unknown> & { type: string };
  const fromUrl = storeFlag === undefined ? undefined : repositoryFromStoreUrl(storeFlag, section);
  // `--store memory`, a one-shot run: whatever store the config names, nothing is kept after it.
  const replacement = storeFlag === dedupDefaults.memoryStore ? { type: 'memory' } : fromUrl;
  if (replacement !== undefined) {
    for (const key of Object.keys(section)) delete section[key];
    Object.assign(section, replacement);
  } else if (storeFlag !== undefined && section.type !== 'rocksdb') {
    throw new ConfigError(
      'repository.type',
      `--store needs the rocksdb store, but the config selects ${section.type}`,
      { source: '--store' },
    );
  } else if (section.type === 'rocksdb') section.path = storeFlag ?? section.path ?? dedupDefaults.storeDir;
  // The memory store's own cap evicts the oldest ids, which would let their repeats through unnoticed.
  if (section.type === 'memory') section.maxEntries ??= dedupDefaults.memoryMaxEntries;
  if (section.type === 'rocksdb') section.memtableMb ??= dedupDefaults.memtableMb;
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
