import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ConfigError, RepositoryError } from '../../src/errors.js';
import { RocksdbRepository } from '../../src/repositories/rocksdb/index.js';
import { runCli } from '../cli/run-cli.js';
import { closeAfter, skipUnlessEnabled } from '../helpers/stores.js';

const root = join(tmpdir(), `idem-rocksdb-dir-${process.pid}`);
const HOUR = 3_600_000;

async function freshDir(): Promise<string> {
  const path = join(root, randomUUID().slice(0, 8));
  await mkdir(path, { recursive: true });
  return path;
}

/** A directory that looks like someone's home: entries named like the store's own, and others. */
async function homeLike(): Promise<string> {
  const home = await freshDir();
  await mkdir(join(home, 'b-2024'));
  await writeFile(join(home, 'b-2024', 'taxes.pdf'), 'receipts');
  await mkdir(join(home, 'trash-old-photos'));
  await writeFile(join(home, 'trash-old-photos', 'cat.jpg'), 'meow');
  await writeFile(join(home, 'notes.txt'), 'hello');
  return home;
}

function rejectsAsNotAStore(path: string) {
  return (error: unknown) => {
    assert.ok(error instanceof ConfigError, String(error));
    assert.equal(error.key, 'repository.path');
    assert.ok(error.message.includes(path), error.message);
    assert.match(error.message, /not an idempotent-consumer store/);
    return true;
  };
}

describe('rocksdb store directory', { skip: skipUnlessEnabled('rocksdb') }, () => {
  after(() => rm(root, { recursive: true, force: true }));

  it('refuses a non-empty directory it did not create, and deletes nothing in it', async () => {
    const home = await homeLike();
    await assert.rejects(RocksdbRepository.open({ path: home }), rejectsAsNotAStore(home));
    assert.deepEqual((await readdir(home)).sort(), ['b-2024', 'notes.txt', 'trash-old-photos']);
    assert.equal(await readFile(join(home, 'b-2024', 'taxes.pdf'), 'utf8'), 'receipts');
    assert.equal(await readFile(join(home, 'trash-old-photos', 'cat.jpg'), 'utf8'), 'meow');
  });

  it('refuses a directory holding only entries named like its own', async () => {
    const dir = await freshDir();
    await mkdir(join(dir, 'b-2024'));
    await mkdir(join(dir, 'trash-old-photos'));
    await assert.rejects(RocksdbRepository.open({ path: dir }), rejectsAsNotAStore(dir));
    assert.deepEqual((await readdir(dir)).sort(), ['b-2024', 'trash-old-photos']);
  });

  it('idem dedup --store refuses such a directory with an error naming it', async () => {
    const home = await homeLike();
    const result = await runCli(['dedup', '--id', 'id', '--store', home], { input: '{"id":"a"}\n' });
    assert.notEqual(result.code, 0, result.stdout);
    assert.equal(result.stdout, '', 'a line was written although the store could not be opened');
    assert.ok(result.stderr.includes(home), result.stderr);
    assert.match(result.stderr, /not an idempotent-consumer store/);
    assert.deepEqual((await readdir(home)).sort(), ['b-2024', 'notes.txt', 'trash-old-photos']);
  });

  it('creates a store in a missing or empty directory, marked as such, and reopens it', async () => {
    const empty = await freshDir();
    const missing = join(await freshDir(), 'new', 'store');
    for (const path of [empty, missing]) {
      const repo = await RocksdbRepository.open({ path });
      await repo.add('kept', { ttlMs: HOUR });
      await repo.close();
      const marker = JSON.parse(await readFile(join(path, 'IDEM-STORE'), 'utf8'));
      assert.deepEqual(marker, { kind: 'idempotent-consumer/rocksdb', format: 2 });
      const reopened = await RocksdbRepository.open({ path });
      assert.equal(await reopened.contains('kept'), true);
      await reopened.close();
    }
  });

  it('in its own directory, leaves entries that are not its own alone', async (t) => {
    const path = await freshDir();
    await (await RocksdbRepository.open({ path })).close();
    await mkdir(join(path, 'trash-old-photos'));
    await writeFile(join(path, 'README'), 'the idem store of service x');
    closeAfter(t, await RocksdbRepository.open({ path }));
    const entries = await readdir(path);
    assert.ok(entries.includes('trash-old-photos') && entries.includes('README'), entries.join(','));
  });

  it('adopts a store of the previous version (no marker) when it holds exactly that layout', async (t) => {
    const path = await freshDir();
    let now = Date.UTC(2030, 0, 1);
    const first = await RocksdbRepository.open({ path, clock: () => now });
    await first.addMany(
      ['old-1', 'old-2'].map((id) => ({ id })),
      { ttlMs: HOUR },
    );
    await first.add('short', { ttlMs: 1_000 });
    await first.close();
    // What the previous version left: meta/, b-<end>/ buckets, index.bin, and no marker.
    await rm(join(path, 'IDEM-STORE'));
    now += 60_000; // the bucket of 'short' has ended: adopting the store still drops it
    const adopted = closeAfter(t, await RocksdbRepository.open({ path, clock: () => now }));
    assert.deepEqual(await adopted.containsMany(['old-1', 'old-2', 'short']), [true, true, false]);
    assert.ok((await readdir(path)).includes('IDEM-STORE'), 'the adopted store was not marked');
  });

  it('refuses a marker-less store layout with anything else in it', async () => {
    const path = await freshDir();
    const repo = await RocksdbRepository.open({ path });
    await repo.add('x', { ttlMs: HOUR });
    await repo.close();
    await rm(join(path, 'IDEM-STORE'));
    await writeFile(join(path, 'notes.txt'), 'mine');
    await assert.rejects(RocksdbRepository.open({ path }), rejectsAsNotAStore(path));
  });

  it('refuses a store of a later format, naming the path', async () => {
    const path = await freshDir();
    await (await RocksdbRepository.open({ path })).close();
    await writeFile(
      join(path, 'IDEM-STORE'),
      JSON.stringify({ kind: 'idempotent-consumer/rocksdb', format: 3 }),
    );
    await assert.rejects(RocksdbRepository.open({ path }), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(error.key, 'repository.path');
      assert.ok(error.message.includes(path), error.message);
      assert.match(error.message, /format 3/);
      return true;
    });
  });

  it('reads a format 1 store (each record under its own key) and marks it format 2', async (t) => {
    const path = await freshDir();
    // With the index off the store writes exactly format 1's layout: every record under its own key.
    const old = await RocksdbRepository.open({ path, indexMaxMb: 0 });
    await old.addMany(
      ['v1-a', 'v1-b'].map((id) => ({ id })),
      { ttlMs: HOUR },
    );
    await old.close();
    await writeFile(
      join(path, 'IDEM-STORE'),
      JSON.stringify({ kind: 'idempotent-consumer/rocksdb', format: 1 }),
    );
    const repo = closeAfter(t, await RocksdbRepository.open({ path }));
    assert.deepEqual(await repo.containsMany(['v1-a', 'v1-b', 'v1-c']), [true, true, false]);
    assert.equal((await repo.addMany([{ id: 'v1-a' }, { id: 'v1-c' }], { ttlMs: HOUR }))[1]?.added, true);
    assert.equal(await repo.remove('v1-b'), true);
    assert.deepEqual(await repo.containsMany(['v1-a', 'v1-b', 'v1-c']), [true, false, true]);
    const marker = JSON.parse(await readFile(join(path, 'IDEM-STORE'), 'utf8'));
    assert.equal(marker.format, 2);
  });

  it('holds the one-process lock through a symlinked path', async (t) => {
    const path = await freshDir();
    const link = join(await freshDir(), 'link');
    await symlink(path, link);
    const repo = closeAfter(t, await RocksdbRepository.open({ path: link }));
    for (const other of [path, link]) {
      await assert.rejects(RocksdbRepository.open({ path: other }), (error: unknown) => {
        assert.ok(error instanceof RepositoryError, String(error));
        assert.ok(error.message.includes(other), error.message);
        return true;
      });
    }
    // The id is handled by the one instance only: no second instance ever held the directory.
    assert.equal((await repo.add('once', { ttlMs: HOUR })).added, true);
    assert.equal(repo.path, path, 'the store did not resolve its real path');
    await repo.close();
    closeAfter(t, await RocksdbRepository.open({ path }));
  });
});
