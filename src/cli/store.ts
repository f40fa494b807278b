import { ConfigError } from '../errors.js';
import { redactUrl } from '../util/redact-text.js';
import { type CliConfig, dedupDefaults } from './options.js';
import { repositoryFromStoreUrl } from './store-url.js';

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
