import assert from 'node:assert/strict';
import { type ContractSuite, LONG_TTL_MS, padded, repoTest, uniqueId, whenPersistent } from './context.js';

/** Every byte value 0..255 as one character each, the way a binary payload read as latin1 looks. */
const ALL_BYTES = String.fromCharCode(...Array.from({ length: 256 }, (_, i) => i));

/** Results that break naive encodings (separators and their escapes, NUL, surrogate pairs, look-alikes). */
const AWKWARD_RESULTS = [
  '',
  '\u0000',
  '\u0001',
  '\u0002',
  '\u0002\u0003',
  '\u0001\u0002\u0000\u0002\u0002\u0001',
  'v{"a":"\u0000\u0001\u0002"}',
  'c\u00011\u0001\u0001x\u0001\u0001',
  'emoji 😀 🎉 𝄞 and 日本語, ZWJ 👩‍👩‍👧',
  'line\nbreak\r\n tab\t u2028\u2028',
  ALL_BYTES,
  Buffer.from(ALL_BYTES, 'latin1').toString('base64'),
  '\\u0000 "quoted" \\',
];

/** Results and fingerprints, which `storeResult` and `fingerprint` rely on: kept and returned unchanged. */
export function resultTests(suite: ContractSuite): void {
  const { options } = suite;
  const test = repoTest(suite);
  test('keeps the result given to confirm and returns it from get, add and getMany', async (repo) => {
    const id = uniqueId('res');
    await repo.add(id, { ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS, owner: 'o' }, { fingerprint: 'fp-1' });
    assert.equal((await repo.get(id))?.result, undefined, 'a claim has no result');
    assert.equal(await repo.confirm({ id, owner: 'o' }, { ttlMs: LONG_TTL_MS, result: 'v{"n":1}' }), true);
    const stored = await repo.get(id);
    assert.equal(stored?.state, 'confirmed');
    assert.equal(stored?.result, 'v{"n":1}');
    assert.equal(stored?.fingerprint, 'fp-1', 'the fingerprint stays with the confirmed record');
    const again = await repo.add(id, { ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS, owner: 'x' });
    assert.equal(!again.added && again.existing.result, 'v{"n":1}', "add's answer carries the result");
    const [many] = await repo.getMany([id]);
    assert.equal(many?.result, 'v{"n":1}');
    const [batch] = await repo.addMany([{ id }], { ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS, owner: 'x' });
    assert.equal(!batch?.added && batch?.existing.result, 'v{"n":1}', "addMany's answer carries it");
  });

  test('keeps one result per claim with confirmMany, and none where none is given', async (repo) => {
    const ids = [uniqueId('m0'), uniqueId('m1'), uniqueId('m2')];
    await repo.addMany(
      ids.map((id) => ({ id })),
      { ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS, owner: 'o' },
    );
    const confirmed = await repo.confirmMany(
      [
        { id: ids[0] as string, owner: 'o', result: 'first' },
        { id: ids[1] as string, owner: 'o' },
        { id: ids[2] as string, owner: 'o', result: 'third\u0001' },
      ],
      { ttlMs: LONG_TTL_MS },
    );
    assert.deepEqual(confirmed, [true, true, true]);
    const records = await repo.getMany(ids);
    assert.deepEqual(
      records.map((r) => [r?.state, r?.result]),
      [
        ['confirmed', 'first'],
        ['confirmed', undefined],
        ['confirmed', 'third\u0001'],
      ],
    );
  });

  test('keeps the result of a lazy mark (add and addMany without a lease), but not of a claim', async (repo) => {
    const single = uniqueId('lazy');
    const added = await repo.add(single, { ttlMs: LONG_TTL_MS }, { result: 'v1', fingerprint: 'fp' });
    assert.equal(added.added && added.record.result, 'v1');
    const stored = await repo.get(single);
    assert.equal(stored?.result, 'v1');
    assert.equal(stored?.fingerprint, 'fp');

    const many = [uniqueId('lm0'), uniqueId('lm1')];
    await repo.addMany(
      [
        { id: many[0] as string, result: 'a', fingerprint: 'fa' },
        { id: many[1] as string, fingerprint: 'fb' },
      ],
      { ttlMs: LONG_TTL_MS },
    );
    const records = await repo.getMany(many);
    assert.deepEqual(
      records.map((r) => [r?.result, r?.fingerprint]),
      [
        ['a', 'fa'],
        [undefined, 'fb'],
      ],
    );

    // A claim has no outcome yet: a result given with it is not kept.
    const claimed = uniqueId('claim');
    await repo.add(claimed, { ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS, owner: 'o' }, { result: 'early' });
    assert.equal((await repo.get(claimed))?.result, undefined);
  });

  test('round-trips any result text: separators, NUL, astral characters, binary-derived text', async (repo) => {
    for (const [i, text] of AWKWARD_RESULTS.entries()) {
      const label = JSON.stringify(text.slice(0, 40));
      const eager = uniqueId(`ue${i}`);
      await repo.add(eager, { ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS, owner: 'o' }, { fingerprint: text });
      assert.equal(await repo.confirm({ id: eager, owner: 'o' }, { ttlMs: LONG_TTL_MS, result: text }), true);
      const confirmed = await repo.get(eager);
      assert.equal(confirmed?.result, text, `confirm ${label}`);
      assert.equal(confirmed?.fingerprint, text, `fingerprint ${label}`);
      const lazy = uniqueId(`ul${i}`);
      await repo.add(lazy, { ttlMs: LONG_TTL_MS }, { result: text });
      assert.equal((await repo.get(lazy))?.result, text, `mark ${label}`);
    }
  });

  test('declares maxResultBytes and keeps a result of exactly that many UTF-8 bytes', async (repo) => {
    const max = repo.capabilities.maxResultBytes;
    assert.equal(max, options.capabilities.maxResultBytes);
    assert.ok(Number.isInteger(max) && max >= 1024, `maxResultBytes ${max}`);
    const text = padded(max, '', '日😀\u0001\u0000', 'r');
    assert.equal(Buffer.byteLength(text, 'utf8'), max);
    const eager = uniqueId('cap');
    await repo.add(eager, { ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS, owner: 'o' }, { fingerprint: 'f' });
    assert.equal(await repo.confirm({ id: eager, owner: 'o' }, { ttlMs: LONG_TTL_MS, result: text }), true);
    assert.equal((await repo.get(eager))?.result, text);
    const lazy = uniqueId('capl');
    await repo.add(lazy, { ttlMs: LONG_TTL_MS }, { result: text, fingerprint: 'f' });
    assert.equal((await repo.get(lazy))?.result, text);
  });

  test(
    'keeps results and fingerprints across close and reopen when persistent',
    whenPersistent(options),
    async (first, ctx) => {
      const eager = uniqueId('pe');
      const lazy = uniqueId('pl');
      await first.add(eager, { ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS, owner: 'o' }, { fingerprint: 'fe' });
      await first.confirm({ id: eager, owner: 'o' }, { ttlMs: LONG_TTL_MS, result: 'kept 😀\u0001' });
      await first.add(lazy, { ttlMs: LONG_TTL_MS }, { result: 'e{"name":"E"}', fingerprint: 'fl' });
      await first.close();
      const reopened = await ctx.open();
      const [a, b] = await reopened.getMany([eager, lazy]);
      assert.deepEqual([a?.result, a?.fingerprint], ['kept 😀\u0001', 'fe']);
      assert.deepEqual([b?.result, b?.fingerprint], ['e{"name":"E"}', 'fl']);
    },
  );
}
