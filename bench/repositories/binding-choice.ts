/**
 * Which RocksDB binding backs the rocksdb store: Level's `rocksdb` 5.x or `@nxtedition/rocksdb` 12.x, each
 * called at its lowest level (the native addon), on the check-and-mark workload: look up a batch of 1000 ids
 * (90% new, 10% already stored), then write the new ones.
 *
 * Each binding's database is populated once (2M ids, fastest bulk path, cached under bench/.data/) and measured
 * in a FRESH process, so lookups hit table files rather than the memtable. Also prints how much the block cache
 * grew during 200k lookups of absent ids on a cold, ample cache: with a working bloom filter only its ~1% false
 * positives read a data block (a few MiB); without one every lookup does (most of the data). A third row runs
 * @nxtedition/rocksdb through its public abstract-level class, to price that layer. Prints figures; asserts
 * nothing. Level's `rocksdb` is not a dependency: install it by hand (`npm install --no-save rocksdb@5`) for its row.
 *
 *   node --import tsx bench/repositories/binding-choice.ts [--ids 2000000] [--batches 200]
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    ids: { type: 'string', default: '2000000' },
    batches: { type: 'string', default: '200' },
    phase: { type: 'string' },
    binding: { type: 'string' },
  },
});
const IDS = Number(args.ids);
const BATCHES = Number(args.batches);
const BATCH = 1000;
const DUPLICATES = 0.1;
const VALUE = 'c\u00011893456000000\u0001\u0001\u0001\u0001';
const self = fileURLToPath(import.meta.url);
const dataDir = join(fileURLToPath(new URL('../.data/', import.meta.url)), `binding-choice-v2-${IDS}`);
const require = createRequire(import.meta.url);

type Callback<T = unknown> = (error: Error | null, value: T) => void;
type Handle = object;

/**
 * Deterministic UUID-shaped id `n` of the series `tag`. The hex part comes first and depends on both, so every
 * series spreads over the whole key space like real ids (a shared prefix would cluster a series in a few
 * table blocks and flatter the lookups).
 */
function id(n: number, tag = ''): string {
  let h = Math.imul(n ^ 0x9e3779b9, 0x85ebca6b) >>> 0;
  for (let i = 0; i < tag.length; i++) h = Math.imul(h ^ tag.charCodeAt(i), 0x01000193) >>> 0;
  const hex: string[] = [];
  for (let i = 0; i < 4; i++) {
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
    hex.push(h.toString(16).padStart(8, '0'));
  }
  const [a, b, c, d] = hex as [string, string, string, string];
  return `${a}-${b.slice(0, 4)}-${b.slice(4)}-${c.slice(0, 4)}-${c.slice(4)}${d}-${tag}${n}`;
}

/** The operations the benchmark needs, implemented per binding at the native level. */
interface Driver {
  /** Opens with a block cache of `cacheBytes` (both bindings default to 8 MiB). */
  open(location: string, cacheBytes?: number): Promise<void>;
  /** Writes [key, value] pairs in one batch. */
  put(keys: readonly string[]): Promise<void>;
  /** Values for keys (undefined where absent). */
  get(keys: readonly string[]): Promise<unknown[]>;
  /** Synchronous lookup, when the binding has one. */
  getSync?(keys: readonly string[]): unknown[];
  /** Bytes in the block cache (data blocks read so far, as filters are held outside it). */
  cacheBytes(): number;
  /** A RocksDB property. */
  property(name: string): string;
  close(): Promise<void>;
}

function nxtedition(): Driver {
  const addon = require('@nxtedition/rocksdb/binding');
  let db: Handle;
  const batch = addon.batch_init();
  const value = Buffer.from(VALUE);
  const scratch = Buffer.allocUnsafe(4096);
  const views: Buffer[] = [];
  const empty = {};
  const utf8 = { valueEncoding: 'utf8' };
  return {
    async open(location, cacheBytes = 8 << 20) {
      db = addon.db_init(location);
      await new Promise<void>((resolve, reject) =>
        addon.db_open(
          db,
          {
            createIfMissing: true,
            compression: false,
            walCompression: false,
            optimize: 'point-lookup',
            filterPolicy: 'bloomfilter:10:false',
            cacheSize: cacheBytes,
          },
          (e: Error | null) => (e ? reject(e) : resolve()),
        ),
      );
    },
    async put(keys) {
      for (const key of keys) {
        const n = scratch.write(key, 0, 'utf8');
        views[n] ??= scratch.subarray(0, n);
        addon.batch_put(batch, views[n], value, empty);
      }
      addon.batch_write(db, batch, empty);
      addon.batch_clear(batch);
    },
    get(keys) {
      return new Promise((resolve, reject) =>
        addon.db_get_many(db, keys, utf8, ((e, v) => (e ? reject(e) : resolve(v as unknown[]))) as Callback),
      );
    },
    getSync(keys) {
      return addon.db_get_many_sync(
        db,
        keys.map((k) => Buffer.from(k)),
        utf8,
      );
    },
    cacheBytes: () => Number(addon.db_get_property(db, 'rocksdb.block-cache-usage')),
    property: (name) => addon.db_get_property(db, name),
    close: () => new Promise((resolve) => addon.db_close(db, resolve)),
  };
}

function level(): Driver {
  const addon = require('rocksdb/binding');
  let db: Handle;
  const options = { asBuffer: false, fillCache: true };
  return {
    async open(location, cacheBytes = 8 << 20) {
      db = addon.db_init();
      mkdirSync(location, { recursive: true });
      await new Promise<void>((resolve, reject) =>
        addon.db_open(
          db,
          location,
          { createIfMissing: true, compression: false, writeBufferSize: 64 << 20, cacheSize: cacheBytes },
          (e: Error | null) => (e ? reject(e) : resolve()),
        ),
      );
    },
    put(keys) {
      const ops = keys.map((key) => ({ type: 'put', key, value: VALUE }));
      return new Promise((resolve, reject) =>
        addon.batch_do(db, ops, {}, (e: Error | null) => (e ? reject(e) : resolve())),
      );
    },
    get(keys) {
      return new Promise((resolve, reject) =>
        addon.db_get_many(db, keys, options, ((e, v) =>
          e ? reject(e) : resolve(v as unknown[])) as Callback),
      );
    },
    cacheBytes: () => Number(addon.db_get_property(db, 'rocksdb.block-cache-usage')),
    property: (name) => addon.db_get_property(db, name),
    close: () => new Promise((resolve) => addon.db_close(db, resolve)),
  };
}

/** @nxtedition/rocksdb through its public class (abstract-level): key/value encoding and option handling per call. */
function nxteditionClass(): Driver {
  const { RocksLevel } = require('@nxtedition/rocksdb');
  let db: {
    open(o: object): Promise<void>;
    batch(): { put(k: string, v: string): void; write(): Promise<void> };
    getMany(keys: readonly string[]): Promise<unknown[]>;
    getProperty(name: string): string;
    close(): Promise<void>;
  };
  return {
    async open(location, cacheBytes = 8 << 20) {
      db = new RocksLevel(location, { valueEncoding: 'utf8' });
      await db.open({
        createIfMissing: true,
        compression: false,
        walCompression: false,
        optimize: 'point-lookup',
        filterPolicy: 'bloomfilter:10:false',
        cacheSize: cacheBytes,
      });
    },
    async put(keys) {
      const batch = db.batch();
      for (const key of keys) batch.put(key, VALUE);
      await batch.write();
    },
    get: (keys) => db.getMany(keys),
    cacheBytes: () => Number(db.getProperty('rocksdb.block-cache-usage')),
    property: (name) => db.getProperty(name),
    close: () => db.close(),
  };
}

/** The database directory of a driver; the class driver reads the one the addon driver wrote (same format). */
function storeOf(name: string): string {
  return join(dataDir, (name === '@nxtedition (class)' ? '@nxtedition/rocksdb' : name).replace('/', '_'));
}

// Level's `rocksdb` is no dependency of this package (a second 43 MB native build for every user): the row runs
// only where it was installed by hand for the comparison (`npm install --no-save rocksdb@5`).
const drivers: Record<string, () => Driver> = {
  '@nxtedition/rocksdb': nxtedition,
  ...(installed('rocksdb/binding') ? { rocksdb: level } : {}),
  '@nxtedition (class)': nxteditionClass,
};

function installed(specifier: string): boolean {
  try {
    require.resolve(specifier);
    return true;
  } catch {
    return false;
  }
}

/** Child phase: fill the database with ids 0..IDS-1. */
async function populate(name: string): Promise<object> {
  const location = storeOf(name);
  rmSync(location, { recursive: true, force: true });
  const driver = (drivers[name] as () => Driver)();
  await driver.open(location);
  const start = performance.now();
  const chunk = 10_000;
  for (let i = 0; i < IDS; i += chunk) {
    const keys: string[] = [];
    for (let n = i; n < Math.min(IDS, i + chunk); n++) keys.push(id(n));
    await driver.put(keys);
  }
  const us = ((performance.now() - start) * 1000) / IDS;
  await driver.close();
  writeFileSync(join(location, 'POPULATED'), String(IDS));
  return { populateUsPerId: us };
}

/** Child phase: the measurements, in a process that has not written the data. */
async function measure(name: string): Promise<object> {
  const location = storeOf(name);
  const driver = (drivers[name] as () => Driver)();
  // Negative lookups first, with a block cache large enough for every data block (so its growth counts the
  // blocks read): a working bloom filter lets only its ~1% false positives read one.
  await driver.open(location, 512 << 20);
  const run = `${process.pid.toString(36)}${Date.now().toString(36)}-`;
  let rnd = 12345;
  const random = () => {
    rnd = (Math.imul(rnd, 1103515245) + 12345) >>> 0;
    return rnd / 2 ** 32;
  };
  const batches = (variant: string, duplicates = DUPLICATES) =>
    Array.from({ length: BATCHES }, (_, b) =>
      Array.from({ length: BATCH }, (_, i) =>
        random() < duplicates ? id(Math.floor(random() * IDS)) : id(b * BATCH + i, `${run}${variant}-`),
      ),
    );

  const negatives = batches('neg', 0);
  const before = driver.cacheBytes();
  let start = performance.now();
  let found = 0;
  for (const keys of negatives) for (const v of await driver.get(keys)) if (v !== undefined) found++;
  const negativeUs = ((performance.now() - start) * 1000) / (BATCHES * BATCH);
  const cacheGrowth = driver.cacheBytes() - before;
  const tableBytes = Number(driver.property('rocksdb.total-sst-files-size'));
  await driver.close();
  await driver.open(location);

  const cpuUs: Record<string, number> = {};
  const checkAndMark = async (variant: string, sync: boolean) => {
    const work = batches(variant);
    const t = performance.now();
    const cpu = process.cpuUsage();
    for (const keys of work) {
      const values = sync && driver.getSync ? driver.getSync(keys) : await driver.get(keys);
      await driver.put(keys.filter((_, i) => values[i] === undefined));
    }
    const used = process.cpuUsage(cpu);
    cpuUs[variant] = (used.user + used.system) / (BATCHES * BATCH);
    return ((performance.now() - t) * 1000) / (BATCHES * BATCH);
  };
  const asyncUs = await checkAndMark('cm', false);
  const syncUs = driver.getSync ? await checkAndMark('cms', true) : undefined;

  const writes = batches('w');
  start = performance.now();
  for (const keys of writes) await driver.put(keys);
  const writeUs = ((performance.now() - start) * 1000) / (BATCHES * BATCH);
  await driver.close();
  return {
    negativeUs,
    cacheGrowth,
    tableBytes,
    found,
    asyncUs,
    asyncCpu: cpuUs.cm,
    syncUs,
    syncCpu: cpuUs.cms,
    writeUs,
  };
}

function child(phase: string, name: string): Record<string, number | undefined> {
  const out = execFileSync(
    process.execPath,
    [
      '--import',
      'tsx',
      self,
      '--phase',
      phase,
      '--binding',
      name,
      '--ids',
      String(IDS),
      '--batches',
      String(BATCHES),
    ],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
  );
  return JSON.parse(out.trim().split('\n').pop() as string);
}

if (args.phase !== undefined) {
  const name = args.binding as string;
  const result = args.phase === 'populate' ? await populate(name) : await measure(name);
  console.log(JSON.stringify(result));
} else {
  mkdirSync(dataDir, { recursive: true });
  if (!('rocksdb' in drivers)) console.log("Level's rocksdb is not installed: its row is left out.");
  const rows: [string, Record<string, number | undefined>][] = [];
  for (const name of Object.keys(drivers)) {
    let populateUs: number | undefined;
    if (!existsSync(join(storeOf(name), 'POPULATED'))) {
      console.log(`populating ${IDS} ids with ${name} ...`);
      populateUs = child('populate', name).populateUsPerId;
    }
    console.log(`measuring ${name} in a fresh process ...`);
    rows.push([name, { ...child('measure', name), populateUs }]);
  }
  const f = (v: number | undefined) => (v === undefined ? '-' : v.toFixed(2));
  const mib = (v: number | undefined) => `${((v ?? 0) / 2 ** 20).toFixed(1)} MiB`;
  console.log(`\nstore: ${IDS} ids; ${BATCHES} batches of ${BATCH}, ${DUPLICATES * 100}% duplicates`);
  console.log('µs per id (wall/CPU where both are given)');
  console.log(
    'binding               populate  lookup absent  check+mark, async get  check+mark, sync get  write',
  );
  for (const [name, r] of rows) {
    const cells = [
      f(r.populateUs).padStart(8),
      f(r.negativeUs).padStart(13),
      `${f(r.asyncUs)}/${f(r.asyncCpu)}`.padStart(21),
      (r.syncUs === undefined ? '-' : `${f(r.syncUs)}/${f(r.syncCpu)}`).padStart(20),
      f(r.writeUs).padStart(5),
    ];
    console.log(`${name.padEnd(21)} ${cells.join('  ')}`);
  }
  console.log(
    '\nbloom filter: data blocks loaded by 200k lookups of absent ids (ample cache, fresh process)',
  );
  for (const [name, r] of rows) {
    console.log(
      `${name.padEnd(21)} ${mib(r.cacheGrowth).padStart(10)} of ${mib(r.tableBytes)} in table files`,
    );
  }
  console.log('(populate "-": cached from an earlier run)');
}
