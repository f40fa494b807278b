import { mkdir, readdir, readFile, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ConfigError, errorMessage, RepositoryError } from '../../errors.js';
import { NativeDb } from './binding.js';
import { isTrashDir, parseBucketDir } from './bucket-set.js';
import { INDEX_FILE } from './startup.js';

/** The file that makes a directory a store; written when the store is created. */
export const MARKER_FILE = 'IDEM-STORE';
/**
 * Layout version written in the marker; a later one is refused. Format 2 keeps records in blobs; a format 1
 * store (each under its own key) is still read, and marked 2 (a format 1 reader would not understand blobs).
 */
export const STORE_FORMAT = 2;
const READABLE_FORMATS: readonly number[] = [1, 2];
const MARKER_KIND = 'idempotent-consumer/rocksdb';
const MARKER_TEMP = /^IDEM-STORE\.tmp-\d+$/;
/** A small database that exists to hold RocksDB's LOCK on the store for as long as it is open. */
const META_DIR = 'meta';

/** Stores open in this process by device and inode: RocksDB's own check compares paths (a symlink gets in). */
const openHere = new Map<string, string>();

/** A store directory this process now holds, until `release`. */
export interface StoreDirectory {
  /** Real absolute path of the store (symlinks resolved). */
  readonly path: string;
  /** Closes the lock-holding database, which lets other instances and processes in. */
  release(): Promise<void>;
}

/**
 * Opens the store directory at `given` and takes its lock, creating the store if the directory is missing or
 * empty; anything but a store, an empty directory or a pre-marker store (adopted) is refused (docs/rocksdb.md).
 */
export async function openStoreDirectory(given: string): Promise<StoreDirectory> {
  const absolute = resolve(given);
  let path: string;
  let identity: string;
  try {
    await mkdir(absolute, { recursive: true });
    path = await realpath(absolute);
    const info = await stat(path);
    identity = `${info.dev}:${info.ino}`;
  } catch (error) {
    throw pathError(absolute, `cannot create the store directory: ${errorMessage(error)}`, error);
  }
  const shown = absolute === path ? path : `${absolute} (real path ${path})`;
  const { layout, format } = await inspect(path, shown);

  const holder = openHere.get(identity);
  if (holder !== undefined) {
    throw new RepositoryError(
      `rocksdb store ${shown} is already open in this process by another repository instance (as ${holder})`,
      { retryable: false },
    );
  }
  openHere.set(identity, shown);
  let meta: NativeDb | undefined;
  try {
    if (layout === 'empty') await writeMarker(path, shown);
    meta = await openMeta(path, shown);
    if (layout === 'legacy' || format !== STORE_FORMAT) await writeMarker(path, shown);
  } catch (error) {
    await meta?.close().catch(() => undefined);
    openHere.delete(identity);
    throw error;
  }
  const lock = meta;
  return {
    path,
    release: async () => {
      try {
        await lock.close();
      } finally {
        openHere.delete(identity);
      }
    },
  };
}

/** What the directory holds: a marked store, nothing, or a pre-marker store; a ConfigError for anything else. */
async function inspect(
  path: string,
  shown: string,
): Promise<{ layout: 'store' | 'empty' | 'legacy'; format: number }> {
  const entries = await readdir(path, { withFileTypes: true }).catch((error: unknown) => {
    throw pathError(shown, `cannot read the store directory: ${errorMessage(error)}`, error);
  });
  if (entries.some((e) => e.name === MARKER_FILE)) {
    return { layout: 'store', format: await checkMarker(path, shown) };
  }
  // A marker write interrupted by a crash leaves only its temp file behind.
  const others = entries.filter((e) => !MARKER_TEMP.test(e.name));
  if (others.length === 0) return { layout: 'empty', format: STORE_FORMAT };
  if (await isLegacyStore(path, others)) return { layout: 'legacy', format: 1 };
  const listed = others
    .map((e) => e.name)
    .sort()
    .slice(0, 5);
  throw pathError(
    shown,
    `is not an idempotent-consumer store: it has no ${MARKER_FILE} marker and is not empty ` +
      `(it holds ${listed.map((name) => JSON.stringify(name)).join(', ')}${others.length > 5 ? `, … ${others.length} entries` : ''}). ` +
      'The store deletes entries it takes for its own, so it only opens an empty directory or one it created; ' +
      'choose a new or empty directory',
  );
}

/** Exactly the layout of a store before the marker: `meta/` and `b-<digits>/` databases, `index.bin`, trash. */
async function isLegacyStore(
  path: string,
  entries: readonly { name: string; isDirectory(): boolean; isFile(): boolean }[],
): Promise<boolean> {
  const databases: string[] = [];
  for (const entry of entries) {
    const { name } = entry;
    if (entry.isDirectory() && (name === META_DIR || parseBucketDir(name) !== undefined))
      databases.push(name);
    else if (entry.isDirectory() && isTrashDir(name)) continue;
    else if (entry.isFile() && (name === INDEX_FILE || name === `${INDEX_FILE}.tmp`)) continue;
    else return false;
  }
  if (!databases.includes(META_DIR)) return false;
  const checks = await Promise.all(databases.map((name) => isRocksdb(join(path, name))));
  return checks.every(Boolean);
}

/** Whether `dir` is a RocksDB database directory (it names its current manifest in CURRENT). */
async function isRocksdb(dir: string): Promise<boolean> {
  try {
    return /^MANIFEST-\d+\n$/.test(await readFile(join(dir, 'CURRENT'), 'utf8'));
  } catch {
    return false;
  }
}

/** The format of the store's marker; throws a ConfigError naming the path for one this version cannot read. */
async function checkMarker(path: string, shown: string): Promise<number> {
  const file = join(path, MARKER_FILE);
  let marker: { kind?: unknown; format?: unknown };
  try {
    marker = JSON.parse(await readFile(file, 'utf8')) as typeof marker;
  } catch (error) {
    throw pathError(shown, `cannot read the store marker ${file}: ${errorMessage(error)}`, error);
  }
  if (marker?.kind !== MARKER_KIND || typeof marker.format !== 'number') {
    throw pathError(shown, `${file} is not a marker of an idempotent-consumer rocksdb store`);
  }
  if (!READABLE_FORMATS.includes(marker.format)) {
    throw pathError(
      shown,
      `the store has format ${marker.format} (${file}); this version reads formats ${READABLE_FORMATS.join(' and ')}`,
    );
  }
  return marker.format;
}

/** Writes the marker through a temp file, so a crash never leaves a half-written one. */
async function writeMarker(path: string, shown: string): Promise<void> {
  const temp = join(path, `${MARKER_FILE}.tmp-${process.pid}`);
  try {
    await writeFile(temp, `${JSON.stringify({ kind: MARKER_KIND, format: STORE_FORMAT })}\n`);
    await rename(temp, join(path, MARKER_FILE));
  } catch (error) {
    await rm(temp, { force: true });
    throw pathError(shown, `cannot write the store marker: ${errorMessage(error)}`, error);
  }
}

/** Opens the store's lock-holding database; a held lock becomes an error naming the store path. */
async function openMeta(path: string, shown: string): Promise<NativeDb> {
  const location = join(path, META_DIR);
  try {
    return await NativeDb.open(location, { createIfMissing: true, cacheSize: 0, walCompression: false });
  } catch (error) {
    if ((error as { code?: string }).code === 'LEVEL_LOCKED') {
      throw new RepositoryError(
        `rocksdb store ${shown} is already open in another process or repository instance ` +
          `(RocksDB lock ${join(location, 'LOCK')}): ${errorMessage(error)}`,
        { cause: error, retryable: false },
      );
    }
    throw pathError(shown, `cannot open the rocksdb store: ${errorMessage(error)}`, error);
  }
}

function pathError(shown: string, problem: string, cause?: unknown): ConfigError {
  return new ConfigError('repository.path', `${shown}: ${problem}`, cause === undefined ? {} : { cause });
}
