import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ConfigError, RepositoryClosedError, RepositoryError } from '../../src/errors.js';
import { NativeDb } from '../../src/repositories/rocksdb/binding.js';
import { RocksdbRepository, type RocksdbRepositoryOptions } from '../../src/repositories/rocksdb/index.js';
import { closeAfter, skipUnlessEnabled } from '../helpers/stores.js';

const root = join(tmpdir(), `idem-rocksdb-store-${process.pid}`);
const HOUR = 3_600_000;
/** With `wal: false`, changes reach RocksDB within 1 s; the test allows a little for the check itself. */
const SAFE_MS = 1_200;
const MODULE = new URL('../../src/repositories/rocksdb/index.ts', import.meta.url).href;

function freshPath(): string {
  return join(root, randomUUID().slice(0, 8));
}

async function bucketDirs(path: string): Promise<string[]> {
  return (await readdir(path)).filter((name) => name.startsWith('b-')).sort();
}

const ids = (label: string, n: number) => Array.from({ length: n }, (_, i) => `${label}-${i}`);

/**
 * Starts a child process that opens the store at `path`, runs `body` (JS, with `repo` in scope), prints READY
 * and then idles until killed. Resolves once READY is printed.
 */
async function startChild(
  path: string,
  options: Omit<RocksdbRepositoryOptions, 'path'>,
  body = '',
): Promise<ChildProcess> {
  const script = `
    const { RocksdbRepository } = await import(${JSON.stringify(MODULE)});
    const repo = await RocksdbRepository.open(${JSON.stringify({ ...options, path })});
    ${body}
    console.log('READY');
    setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk) => {
      if (String(chunk).includes('READY')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`child exited (${code}) before READY: ${stderr}`)));
  });
  return child;
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

describe('rocksdb store', { skip: skipUnlessEnabled('rocksdb') }, () => {
  after(() => rm(root, { recursive: true, force: true }));

  it('drops a bucket as a whole directory once the clock passes its end', async (t) => {
    const path = freshPath();
    let now = Date.UTC(2030, 0, 1);
    const start = now;
    const repo = closeAfter(t, await RocksdbRepository.open({ path, bucketMs: 10_000, clock: () => now }));
    const early = ids('early', 100);
    const late = ids('late', 100);
    await repo.addMany(
      early.map((id) => ({ id })),
      { ttlMs: 60_000 },
    );
    now += 30_000;
    await repo.addMany(
      late.map((id) => ({ id })),
      { ttlMs: 60_000 },
    );
    assert.deepEqual(await bucketDirs(path), [`b-${start + 70_000}`, `b-${start + 100_000}`]);
    assert.equal(repo.stats().index.entries, 200);

    now = start + 70_000; // the early ids expired at +60 s; their bucket ends at +70 s
    assert.deepEqual(await repo.containsMany([early[0] as string, late[0] as string]), [false, true]);
    assert.deepEqual(
      repo.stats().buckets.map((b) => b.name),
      [`b-${start + 100_000}`],
    );
    assert.equal(repo.stats().index.entries, 100, 'index entries of the dropped bucket were kept');
    await repo.close(); // waits for the background delete
    assert.deepEqual(await bucketDirs(path), [`b-${start + 100_000}`]);
  });

  it('checks a recent duplicate against the blob kept in memory, also once a new bucket has its slot', async (t) => {
    const path = freshPath();
    let now = Date.UTC(2030, 0, 1);
    const repo = closeAfter(t, await RocksdbRepository.open({ path, bucketMs: 10_000, clock: () => now }));
    const reads = t.mock.method(NativeDb.prototype, 'getBuffers');
    const early = ids('early', 100);
    await repo.markMany(
      early.map((id) => ({ id })),
      { ttlMs: 60_000 },
    );
    const found = await repo.getMany(early);
    assert.deepEqual(
      found.map((r) => r?.id),
      early,
    );
    assert.equal(reads.mock.callCount(), 0, 'the blobs just written were read from RocksDB');
    now += 70_000; // the early bucket is dropped; the next bucket takes its slot and blob numbers
    const late = ids('late', 100);
    await repo.markMany(
      late.map((id) => ({ id })),
      { ttlMs: 60_000 },
    );
    assert.deepEqual(await repo.containsMany([...early, ...late]), [
      ...early.map(() => false),
      ...late.map(() => true),
    ]);
    await repo.close();
    const reopened = closeAfter(
      t,
      await RocksdbRepository.open({ path, bucketMs: 10_000, clock: () => now }),
    );
    assert.deepEqual(
      (await reopened.getMany(late)).map((r) => r?.id),
      late,
    );
    assert.ok(reads.mock.callCount() > 0, 'a fresh process reads the blobs from RocksDB');
  });

  it('moves a confirmed record to the bucket of its new retention', async (t) => {
    const path = freshPath();
    let now = Date.UTC(2030, 0, 1);
    const repo = closeAfter(t, await RocksdbRepository.open({ path, bucketMs: 10_000, clock: () => now }));
    const claimed = ids('claim', 50);
    await repo.addMany(
      claimed.map((id) => ({ id })),
      { ttlMs: 20_000, leaseMs: 20_000, owner: 'w' },
    );
    const [claimBucket] = await bucketDirs(path);
    const ok = await repo.confirmMany(
      claimed.map((id) => ({ id, owner: 'w' })),
      { ttlMs: HOUR },
    );
    assert.ok(ok.every(Boolean));
    now += 30_001; // past the claims' bucket
    assert.ok((await repo.containsMany(claimed)).every(Boolean), 'confirmed ids lost with the claim bucket');
    assert.equal((await repo.get(claimed[0] as string))?.state, 'confirmed');
    assert.ok(!repo.stats().buckets.some((b) => b.name === claimBucket));
  });

  it('names the path when the store is already open in this process', async (t) => {
    const path = freshPath();
    closeAfter(t, await RocksdbRepository.open({ path }));
    await assert.rejects(RocksdbRepository.open({ path }), (error: unknown) => {
      assert.ok(error instanceof RepositoryError, String(error));
      assert.ok(error.message.includes(path), error.message);
      return true;
    });
  });

  it('names the path when another process holds the store, and opens once it is gone', async (t) => {
    const path = freshPath();
    const child = await startChild(path, {});
    t.after(() => kill(child));
    await assert.rejects(RocksdbRepository.open({ path }), (error: unknown) => {
      assert.ok(error instanceof RepositoryError, String(error));
      assert.ok(error.message.includes(path), error.message);
      return true;
    });
    await kill(child);
    closeAfter(t, await RocksdbRepository.open({ path }));
  });

  it('names the path when it cannot be used as a directory', async () => {
    await mkdir(root, { recursive: true });
    const file = join(root, `file-${randomUUID().slice(0, 8)}`);
    await writeFile(file, 'not a directory');
    for (const path of [file, join(file, 'below')]) {
      await assert.rejects(RocksdbRepository.open({ path }), (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.key, 'repository.path');
        assert.ok(error.message.includes(path), error.message);
        return true;
      });
    }
  });

  it('rejects an unknown option with a ConfigError naming it', async () => {
    const options = { path: freshPath(), bucketSize: 5 } as unknown as RocksdbRepositoryOptions;
    await assert.rejects(RocksdbRepository.open(options), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(error.key, 'repository.bucketSize');
      return true;
    });
  });

  it('presizes the key index for expectedIds and names a bad value', async (t) => {
    const plain = closeAfter(t, await RocksdbRepository.open({ path: freshPath() }));
    const presized = closeAfter(
      t,
      await RocksdbRepository.open({ path: freshPath(), expectedIds: 1_000_000 }),
    );
    const bytes = presized.stats().index.bytes;
    assert.ok(bytes > plain.stats().index.bytes, String(bytes));
    await presized.addMany(
      ids('pre', 20_000).map((id) => ({ id })),
      { ttlMs: HOUR },
    );
    assert.equal(presized.stats().index.entries, 20_000);
    assert.equal(presized.stats().index.bytes, bytes);
    for (const expectedIds of [-1, 1.5, '10']) {
      const options = { path: freshPath(), expectedIds } as unknown as RocksdbRepositoryOptions;
      await assert.rejects(RocksdbRepository.open(options), (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.key, 'repository.expectedIds');
        return true;
      });
    }
  });

  it('confirms new ids and re-claimed ids with a dead copy on disk in one call, and keeps both kinds', async () => {
    const path = freshPath();
    let now = Date.UTC(2030, 0, 1);
    const clock = () => now;
    const first = await RocksdbRepository.open({ path, clock });
    const old = ids('old', 50);
    await first.markMany(
      old.map((id) => ({ id })),
      { ttlMs: 60_000 },
    );
    now += 120_000; // the old marks expired: dead copies on disk
    const fresh = ids('fresh', 50);
    const all = [...old, ...fresh];
    const claims = await first.addMany(
      all.map((id, i) => ({ id, ...(i % 10 === 0 ? { fingerprint: `f${i}` } : {}) })),
      { ttlMs: HOUR, leaseMs: 30_000, owner: 'me' },
    );
    assert.ok(claims.every((c) => c.added));
    const confirmed = await first.confirmMany(
      all.map((id, i) => ({ id, owner: 'me', ...(i % 7 === 0 ? { result: `r${i}` } : {}) })),
      { ttlMs: HOUR },
    );
    assert.deepEqual(
      confirmed,
      all.map(() => true),
    );
    await first.close();
    const reopened = await RocksdbRepository.open({ path, clock });
    try {
      const records = await reopened.getMany(all);
      records.forEach((record, i) => {
        assert.equal(record?.state, 'confirmed', all[i]);
        assert.equal(record?.expiresAt, now + HOUR, all[i]);
        assert.equal(record?.fingerprint, i % 10 === 0 ? `f${i}` : undefined, all[i]);
        assert.equal(record?.result, i % 7 === 0 ? `r${i}` : undefined, all[i]);
      });
    } finally {
      await reopened.close();
    }
  });

  it('keeps every id across a graceful close with the WAL off', async () => {
    const path = freshPath();
    const marked = ids('lazy', 500);
    const first = await RocksdbRepository.open({ path, wal: false });
    await first.addMany(
      marked.map((id) => ({ id })),
      { ttlMs: HOUR },
    );
    await first.add('claim', { ttlMs: HOUR, leaseMs: HOUR, owner: 'o' });
    await first.close();
    const reopened = await RocksdbRepository.open({ path, wal: false });
    try {
      assert.ok((await reopened.containsMany(marked)).every(Boolean));
      assert.equal((await reopened.get('claim'))?.owner, 'o');
    } finally {
      await reopened.close();
    }
  });

  it('keeps confirmed ids and lazy marks written with the WAL on when the process is SIGKILLed', async (t) => {
    const path = freshPath();
    // A graceful close first leaves an index snapshot, which the killed run then makes stale.
    const before = await RocksdbRepository.open({ path });
    await before.add('before-kill', { ttlMs: HOUR });
    await before.close();
    const child = await startChild(
      path,
      { wal: true },
      `
      const lazy = Array.from({ length: 1000 }, (_, i) => ({ id: 'lazy-' + i }));
      await repo.addMany(lazy, { ttlMs: ${HOUR} });
      const claims = Array.from({ length: 10 }, (_, i) => ({ id: 'claim-' + i }));
      await repo.addMany(claims, { ttlMs: ${HOUR}, leaseMs: ${HOUR}, owner: 'child' });
      await repo.confirmMany(claims.map(({ id }) => ({ id, owner: 'child' })), { ttlMs: ${HOUR} });
      await repo.add('open-claim', { ttlMs: ${HOUR}, leaseMs: ${HOUR}, owner: 'child' });`,
    );
    await kill(child);
    const repo = closeAfter(t, await RocksdbRepository.open({ path }));
    assert.ok((await repo.containsMany(ids('lazy', 1000))).every(Boolean), 'lazy marks lost');
    const claims = await repo.getMany(ids('claim', 10));
    assert.ok(
      claims.every((r) => r?.state === 'confirmed'),
      'confirmed claims lost',
    );
    // An unconfirmed claim is buffered for up to a second: the kill may have forgotten it (freeing the id at
    // once, as its owner died), or it is intact.
    const open = await repo.get('open-claim');
    assert.ok(open === undefined || (open.state === 'in-flight' && open.owner === 'child'));
    assert.equal(await repo.contains('before-kill'), true);
    assert.equal(await repo.contains('never-added'), false);
  });

  it('after a SIGKILL, catches a snapshot up with the blobs written since, exactly (and unpacks what does not fit)', async (t) => {
    const path = freshPath();
    // The snapshot knows the first marks; the killed run then adds blobs to the same bucket: more marks, a
    // removal (a tombstone entry), a re-add, and a claim confirmed into another bucket (a tombstone behind it).
    const before = await RocksdbRepository.open({ path });
    await before.addMany(
      ids('old', 2000).map((id) => ({ id })),
      { ttlMs: HOUR },
    );
    await before.add('moved', { ttlMs: HOUR, leaseMs: 1000, owner: 'o' });
    await before.close();
    const child = await startChild(
      path,
      { wal: true },
      `
      const marks = Array.from({ length: 3000 }, (_, i) => ({ id: 'new-' + i }));
      for (let i = 0; i < marks.length; i += 1000) await repo.addMany(marks.slice(i, i + 1000), { ttlMs: ${HOUR} });
      await repo.remove('old-5');
      await repo.remove('new-6');
      await repo.add('new-7', { ttlMs: ${HOUR} }, { fingerprint: 'x' });
      await repo.remove('new-7');
      await repo.add('new-7', { ttlMs: ${HOUR} }, { fingerprint: 'again' });
      await repo.confirm({ id: 'moved', owner: 'o' }, { ttlMs: ${24 * HOUR} });`,
    );
    await kill(child);
    const stored = [...ids('old', 2000), ...ids('new', 3000)];
    const expected = stored.map((id) => id !== 'old-5' && id !== 'new-6');
    const check = async (repo: RocksdbRepository, when: string) => {
      assert.deepEqual(await repo.containsMany(stored), expected, when);
      assert.equal((await repo.get('new-7'))?.fingerprint, 'again', when);
      assert.equal((await repo.get('moved'))?.state, 'confirmed', when);
      assert.ok(!(await repo.containsMany(ids('absent', 500))).some(Boolean), when);
      assert.equal((await repo.add('new-9', { ttlMs: HOUR })).added, false, when);
    };
    const caughtUp = await RocksdbRepository.open({ path });
    await check(caughtUp, 'caught up');
    assert.ok(caughtUp.stats().buckets.every((b) => b.indexed));
    await caughtUp.close();
    // Killed again after more writes: the snapshot of that graceful close is caught up once more.
    const again = await startChild(path, { wal: true }, `await repo.add('later', { ttlMs: ${HOUR} });`);
    await kill(again);
    const second = await RocksdbRepository.open({ path });
    await check(second, 'caught up twice');
    assert.equal(await second.contains('later'), true);
    await second.close();
    const third = await startChild(path, { wal: true }, `await repo.add('last', { ttlMs: ${HOUR} });`);
    await kill(third);
    // The index off: the snapshot is not used and the blobs are unpacked under their keys, still exact.
    const unpacked = closeAfter(t, await RocksdbRepository.open({ path, indexMaxMb: 0 }));
    await check(unpacked, 'unpacked');
    assert.equal(await unpacked.contains('last'), true);
  });

  it('saves its key index while it runs: killed before it ever closed, it restarts from that snapshot, exactly', async (t) => {
    const path = freshPath();
    // A store that never closes gracefully (issue 22: 30.6 s to reopen at 50M ids, every bucket rescanned). Saved
    // every 1,000 ids (and a tenth of the index) here; the marks after the last save are caught up from their
    // blobs, the removal too.
    const child = await startChild(
      path,
      { wal: true, indexSnapshotKeys: 1000 },
      `
      const marks = Array.from({ length: 5000 }, (_, i) => ({ id: 'mark-' + i }));
      for (let i = 0; i < marks.length; i += 1000) await repo.addMany(marks.slice(i, i + 1000), { ttlMs: ${HOUR} });
      await repo.addMany(Array.from({ length: 300 }, (_, i) => ({ id: 'tail-' + i })), { ttlMs: ${HOUR} });
      await repo.remove('mark-7');
      if (repo.stats().snapshots < 1) throw new Error('no snapshot was written while the store ran');`,
    );
    await kill(child);
    const repo = closeAfter(t, await RocksdbRepository.open({ path }));
    const { startup } = repo.stats();
    assert.equal(startup.snapshot, true, 'the periodic snapshot was used');
    assert.equal(startup.rescanned, 0, `no bucket scanned whole: ${JSON.stringify(startup)}`);
    assert.ok(startup.caughtUp + startup.fromSnapshot >= 1);
    const stored = [...ids('mark', 5000), ...ids('tail', 300)];
    assert.deepEqual(
      await repo.containsMany(stored),
      stored.map((id) => id !== 'mark-7'),
    );
    assert.ok(!(await repo.containsMany(ids('absent', 500))).some(Boolean));
    assert.equal((await repo.add('mark-9', { ttlMs: HOUR })).added, false);
    assert.ok(repo.stats().buckets.every((b) => b.indexed));
  });

  it('without periodic snapshots (indexSnapshotKeys = 0), a kill before any close rescans, still exact', async (t) => {
    const path = freshPath();
    const child = await startChild(
      path,
      { wal: true, indexSnapshotKeys: 0 },
      `await repo.addMany(Array.from({ length: 3000 }, (_, i) => ({ id: 'mark-' + i })), { ttlMs: ${HOUR} });`,
    );
    await kill(child);
    const repo = closeAfter(t, await RocksdbRepository.open({ path }));
    assert.deepEqual(repo.stats().startup, { snapshot: false, fromSnapshot: 0, caughtUp: 0, rescanned: 1 });
    assert.ok((await repo.containsMany(ids('mark', 3000))).every(Boolean));
  });

  it('with the WAL off, keeps what was confirmed a second before a SIGKILL, though the caller never yields', async (t) => {
    const path = freshPath();
    await mkdir(root, { recursive: true });
    const report = join(root, `report-${randomUUID().slice(0, 8)}.json`);
    // Small batches in a loop of awaited calls that never yields to timers (it spins between batches), so the
    // flush timer never fires; ~5,000 ids a second stay far below the flush-by-count threshold. The child
    // notes how many batches were confirmed at least SAFE_MS before it SIGKILLs itself.
    const script = `
      const { RocksdbRepository } = await import(${JSON.stringify(MODULE)});
      const { writeFileSync } = await import('node:fs');
      const repo = await RocksdbRepository.open(${JSON.stringify({ path, wal: false })});
      const confirmedAt = [];
      const start = performance.now();
      // At least 3 s, and on a loaded machine on until 100 batches were confirmed SAFE_MS before now (60 s at most).
      const early = () => confirmedAt.filter((at) => at <= performance.now() - ${SAFE_MS}).length;
      while (performance.now() - start < 3000 || (early() < 100 && performance.now() - start < 60000)) {
        const k = confirmedAt.length;
        for (const spinUntil = performance.now() + 2; performance.now() < spinUntil; );
        await repo.addMany(Array.from({ length: 10 }, (_, j) => ({ id: 'tight-' + k + '-' + j })), { ttlMs: ${HOUR} });
        confirmedAt.push(performance.now());
      }
      const killAt = performance.now();
      const safe = confirmedAt.filter((at) => at <= killAt - ${SAFE_MS}).length;
      writeFileSync(${JSON.stringify(report)}, JSON.stringify({ batches: confirmedAt.length, safe }));
      process.kill(process.pid, 'SIGKILL');`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk) => {
      stderr += chunk;
    });
    const [, signal] = (await once(child, 'exit')) as [number | null, string | null];
    assert.equal(signal, 'SIGKILL', stderr);
    const { batches, safe } = JSON.parse(await readFile(report, 'utf8')) as { batches: number; safe: number };
    assert.ok(safe >= 100, `the child confirmed only ${safe} of ${batches} batches early enough`);
    const repo = closeAfter(t, await RocksdbRepository.open({ path }));
    const expected = Array.from({ length: safe }, (_, k) => ids(`tight-${k}`, 10)).flat();
    const found = await repo.containsMany(expected);
    const lost = expected.filter((_, i) => !found[i]);
    assert.equal(lost.length, 0, `${lost.length} of ${expected.length} confirmed ids lost, e.g. ${lost[0]}`);
  });

  it('rebuilds exact answers from blobs after a SIGKILL, and unpacks them for an index too small to hold them', async (t) => {
    const path = freshPath();
    // Marks, a removal, a re-add after removal and a confirm that moves a claim: the blobs then hold several
    // entries (and a tombstone) for some keys, and the killed run leaves no index snapshot.
    const child = await startChild(
      path,
      { wal: true },
      `
      const marks = Array.from({ length: 3000 }, (_, i) => ({ id: 'mark-' + i }));
      for (let i = 0; i < marks.length; i += 1000) await repo.addMany(marks.slice(i, i + 1000), { ttlMs: ${HOUR} });
      await repo.remove('mark-5');
      await repo.remove('mark-6');
      await repo.add('mark-6', { ttlMs: ${HOUR} }, { fingerprint: 'again' });
      await repo.add('moved', { ttlMs: ${HOUR}, leaseMs: 1000, owner: 'o' });
      await repo.confirm({ id: 'moved', owner: 'o' }, { ttlMs: ${24 * HOUR} });`,
    );
    await kill(child);
    const marks = ids('mark', 3000);
    const expectFound = marks.map((id) => id !== 'mark-5');
    const check = async (repo: RocksdbRepository, when: string) => {
      assert.deepEqual(await repo.containsMany(marks), expectFound, when);
      assert.equal((await repo.get('mark-6'))?.fingerprint, 'again', when);
      assert.equal((await repo.get('moved'))?.state, 'confirmed', when);
      assert.ok(!(await repo.containsMany(ids('absent', 500))).some(Boolean), when);
    };
    const rebuilt = await RocksdbRepository.open({ path });
    await check(rebuilt, 'after the SIGKILL');
    await rebuilt.close();
    // Index off: the blobs are rewritten as records under their own keys.
    const unpacked = await RocksdbRepository.open({ path, indexMaxMb: 0 });
    await check(unpacked, 'with the index off');
    await unpacked.close();
    // Indexed again, over records under their own keys; new blobs are written beside them.
    const repo = closeAfter(t, await RocksdbRepository.open({ path }));
    await check(repo, 'indexed again');
    assert.equal(await repo.remove('mark-7'), true);
    assert.equal(await repo.contains('mark-7'), false);
    assert.equal((await repo.add('mark-5', { ttlMs: HOUR })).added, true);
    assert.equal((await repo.add('mark-5', { ttlMs: HOUR })).added, false);
    await repo.close();
    const last = closeAfter(t, await RocksdbRepository.open({ path }));
    assert.equal(await last.contains('mark-7'), false);
    assert.equal(await last.contains('mark-5'), true);
    assert.equal(await last.contains('mark-8'), true);
  });

  it('markMany writes new ids without a read, keeping their fields, and reads where the index knows a copy', async (t) => {
    const path = freshPath();
    let now = Date.UTC(2030, 0, 1);
    const clock = () => now;
    // A lapsed claim stored under its own key (written with the index off), in the bucket later marks go to.
    const unindexed = await RocksdbRepository.open({ path, indexMaxMb: 0, clock });
    await unindexed.add('lapsed', { ttlMs: HOUR, leaseMs: 1_000, owner: 'crashed' });
    await unindexed.close();
    const claimer = await RocksdbRepository.open({ path, clock });
    await claimer.add('live', { ttlMs: HOUR, leaseMs: HOUR, owner: 'worker' });
    await claimer.close();
    // Nothing buffered now, so the ids the index does not know take the write without a read.
    const repo = closeAfter(t, await RocksdbRepository.open({ path, clock }));
    now += 2_000;
    const marked = await repo.markMany(
      [{ id: 'lapsed' }, { id: 'live' }, { id: 'timed', eventTime: 1_700_000_000_123 }, { id: 'plain' }],
      { ttlMs: HOUR },
    );
    assert.deepEqual(marked, [true, false, true, true]);
    const [lapsed, live, timed, plain] = await repo.getMany(['lapsed', 'live', 'timed', 'plain']);
    assert.equal(lapsed?.state, 'confirmed', 'the copy under the key must not hide the mark');
    assert.equal(lapsed?.owner, undefined);
    assert.equal(live?.owner, 'worker');
    assert.equal(timed?.eventTime, 1_700_000_000_123);
    assert.equal(plain?.state, 'confirmed');
    assert.equal(plain?.eventTime, undefined);
    assert.equal(plain?.expiresAt, now + HOUR);
    await repo.close();
    const reopened = closeAfter(t, await RocksdbRepository.open({ path, clock }));
    assert.deepEqual(await reopened.containsMany(['lapsed', 'live', 'timed', 'plain', 'never']), [
      true,
      true,
      true,
      true,
      false,
    ]);
  });

  it('scan reports each stored id once, as get does: from blobs, moved copies and the write buffer, by pages', async (t) => {
    const path = freshPath();
    let now = Date.UTC(2030, 0, 1);
    const clock = () => now;
    const many = ids('many', 2_500);
    const claimed = ids('claim', 40);
    const first = await RocksdbRepository.open({ path, bucketMs: 10_000, clock });
    for (let i = 0; i < many.length; i += 500) {
      await first.addMany(
        many.slice(i, i + 500).map((id) => ({ id })),
        { ttlMs: HOUR },
      );
    }
    await first.addMany(
      claimed.map((id) => ({ id })),
      { ttlMs: 20_000, leaseMs: 20_000, owner: 'w' },
    );
    await first.close();

    // With the WAL off every change below stays buffered (for up to 1 s): confirmed claims move to the hour
    // bucket, removals hide stored ids, and new claims exist nowhere on disk yet.
    const second = await RocksdbRepository.open({ path, bucketMs: 10_000, clock, wal: false });
    const moved = claimed.slice(0, 20);
    assert.ok(
      (
        await second.confirmMany(
          moved.map((id) => ({ id, owner: 'w' })),
          { ttlMs: HOUR },
        )
      ).every(Boolean),
    );
    const removed = many.slice(100, 110);
    for (const id of removed) assert.ok(await second.remove(id));
    await second.add('short-lived', { ttlMs: HOUR });
    assert.ok(await second.remove('short-lived'));
    const fresh = ids('fresh', 30);
    await second.addMany(
      fresh.map((id) => ({ id })),
      { ttlMs: 20_000, leaseMs: 20_000, owner: 'v' },
    );

    const expectScan = async (repo: RocksdbRepository, expected: string[]) => {
      assert.ok(repo.scan, 'the rocksdb store lists its ids');
      const counts = new Map<string, number>();
      const seen = new Map<string, unknown>();
      const pages: number[] = [];
      await repo.scan((page) => {
        pages.push(page.length);
        for (const record of page) {
          counts.set(record.id as string, (counts.get(record.id as string) ?? 0) + 1);
          seen.set(record.id as string, record);
        }
      });
      const twice = [...counts].filter(([, n]) => n > 1).map(([id]) => id);
      assert.deepEqual(twice, [], 'no id reported twice');
      assert.deepEqual([...counts.keys()].sort(), [...expected].sort());
      assert.ok(pages.length >= 3 && pages.every((n) => n > 0 && n <= 1_000 + 32), `pages ${pages}`);
      const stored = await repo.getMany(expected);
      for (let i = 0; i < expected.length; i++) {
        assert.deepEqual(seen.get(expected[i] as string), stored[i], `${expected[i]} as get answers it`);
      }
    };
    const live = [...many.filter((id) => !removed.includes(id)), ...claimed, ...fresh];
    await expectScan(second, live);
    await second.close();

    // Written out: each moved claim now has a copy hidden by a tombstone in the claims' bucket.
    const third = closeAfter(t, await RocksdbRepository.open({ path, bucketMs: 10_000, clock }));
    await expectScan(third, live);
    now += 30_001; // the claims' bucket is dropped; the confirmed ones live on in the hour bucket
    await expectScan(third, [...many.filter((id) => !removed.includes(id)), ...moved]);
  });

  it('a close during a scan ends it at the next page, and the close does not wait for the scan', async () => {
    const repo = await RocksdbRepository.open({ path: freshPath() });
    await repo.addMany(
      ids('page', 3_000).map((id) => ({ id })),
      { ttlMs: HOUR },
    );
    let closing: Promise<void> | undefined;
    let pages = 0;
    await assert.rejects(
      repo.scan(() => {
        pages++;
        closing ??= repo.close();
      }),
      RepositoryClosedError,
    );
    assert.equal(pages, 1);
    await closing;
  });

  it('stays exact when the key index is full or off', async (t) => {
    // 1 MiB holds 2^17 entries, 3/4 of which may be used: 100k ids overflow it.
    for (const indexMaxMb of [1, 0]) {
      const path = freshPath();
      const repo = closeAfter(t, await RocksdbRepository.open({ path, indexMaxMb }));
      const stored = ids('full', indexMaxMb === 0 ? 5_000 : 100_000);
      for (let i = 0; i < stored.length; i += 5_000) {
        await repo.addMany(
          stored.slice(i, i + 5_000).map((id) => ({ id })),
          { ttlMs: HOUR },
        );
      }
      assert.equal(repo.stats().buckets[0]?.indexed, false);
      const sample = stored.filter((_, i) => i % 97 === 0);
      assert.ok(
        (await repo.containsMany(sample)).every(Boolean),
        `stored ids missed (indexMaxMb ${indexMaxMb})`,
      );
      assert.ok(!(await repo.containsMany(ids('absent', 500))).some(Boolean));
      const again = await repo.addMany(
        sample.map((id) => ({ id })),
        { ttlMs: HOUR },
      );
      assert.ok(again.every((r) => !r.added));
      await repo.close();
      const reopened = closeAfter(t, await RocksdbRepository.open({ path, indexMaxMb }));
      assert.ok((await reopened.containsMany(sample)).every(Boolean), 'ids missed after reopen');
    }
  });
});
