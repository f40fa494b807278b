import assert from 'node:assert/strict';
import { InvalidIdError } from '../errors.js';
import { type ContractSuite, claimBy, LONG_TTL_MS, padded, repoTest, uniqueId } from './context.js';

export function idTests(suite: ContractSuite): void {
  const test = repoTest(suite);
  test('rejects an empty id with InvalidIdError', async (repo) => {
    await assert.rejects(repo.add('', { ttlMs: LONG_TTL_MS }), InvalidIdError);
    await assert.rejects(repo.add(new Uint8Array(0), { ttlMs: LONG_TTL_MS }), InvalidIdError);
    await assert.rejects(repo.contains(''), InvalidIdError);
  });

  test('stores unicode ids exactly', async (repo) => {
    const base = uniqueId('ü');
    const ids = [
      `${base}-日本語`,
      `${base}-😀`,
      `${base}-e\u0301`,
      `${base}-\u00e9`,
      `${base} with spaces:and|pipes`,
    ];
    for (const id of ids) assert.equal((await repo.add(id, { ttlMs: LONG_TTL_MS })).added, true, id);
    for (const id of ids) assert.equal((await repo.add(id, { ttlMs: LONG_TTL_MS })).added, false, id);
    await assert.rejects(repo.add(`${base}\ud800`, { ttlMs: LONG_TTL_MS }), InvalidIdError);
  });

  test('stores binary ids, distinct from each other and from text ids', async (repo) => {
    const seed = Buffer.from(uniqueId());
    const a = Buffer.concat([Buffer.from([0, 255, 1, 254]), seed]);
    const b = Buffer.concat([Buffer.from([0, 255, 1, 253]), seed]);
    assert.equal((await repo.add(a, { ttlMs: LONG_TTL_MS })).added, true);
    assert.equal((await repo.add(b, { ttlMs: LONG_TTL_MS })).added, true);
    assert.equal((await repo.add(new Uint8Array(a), { ttlMs: LONG_TTL_MS })).added, false);
    assert.equal(await repo.contains(a.toString('latin1')), false);
  });

  test('accepts ids up to the declared limit and rejects longer ones', async (repo, ctx) => {
    const max = ctx.options.capabilities.maxIdBytes;
    const atLimit = padded(max, uniqueId('big'));
    assert.equal((await repo.add(atLimit, { ttlMs: LONG_TTL_MS })).added, true);
    assert.equal(await repo.contains(atLimit), true);
    await assert.rejects(repo.add(`${atLimit}x`, { ttlMs: LONG_TTL_MS }), InvalidIdError);
    // Multi-byte characters count in bytes, not UTF-16 units.
    await assert.rejects(repo.add('é'.repeat(max / 2 + 1), { ttlMs: LONG_TTL_MS }), InvalidIdError);
  });

  test('canonical keys are injective: text ids and binary ids never meet', async (repo) => {
    const seed = Buffer.from(uniqueId());
    const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
    // Every entry is a different id; a store that maps two of them to one key answers the later one as a duplicate.
    const ids: Array<[string, string | Uint8Array]> = [
      ['bytes ff fe', Buffer.from([0xff, 0xfe])],
      ['text "\\0b64://4="', '\u0000b64://4='],
      ['bytes seed', seed],
      ['text "\\0b64:" + base64(seed)', `\u0000b64:${b64(seed)}`],
      ['text "\\0\\0b64:" + base64(seed)', `\u0000\u0000b64:${b64(seed)}`],
      ['text seed', seed.toString('utf8')],
      ['text "\\0" + seed', `\u0000${seed.toString('utf8')}`],
      ['text "\\0\\0" + seed', `\u0000\u0000${seed.toString('utf8')}`],
      ['text base64(seed)', b64(seed)],
      ['bytes of "\\0b64:" + base64(seed)', Buffer.from(`\u0000b64:${b64(seed)}`)],
      ['bytes 00', Buffer.from([0])],
      ['text "\\0"', '\u0000'],
      ['text "\\0b64:AA=="', '\u0000b64:AA=='],
    ];
    for (const [label, id] of ids) {
      assert.equal((await repo.add(id, { ttlMs: LONG_TTL_MS })).added, true, `${label} met an earlier id`);
    }
    for (const [label, id] of ids) {
      assert.equal(await repo.contains(id), true, label);
      assert.equal((await repo.add(id, { ttlMs: LONG_TTL_MS })).added, false, label);
    }
  });

  test('a text id that looks like an encoded binary id is new while the binary id is claimed, and the other way round', async (repo) => {
    const bytes = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(uniqueId())]);
    const lookalike = `\u0000b64:${bytes.toString('base64')}`;
    assert.equal((await repo.add(bytes, claimBy('a'))).added, true);
    assert.equal(await repo.contains(lookalike), false);
    assert.equal(await repo.get(lookalike), undefined);
    assert.deepEqual(await repo.containsMany([lookalike, bytes]), [false, true]);
    assert.equal(await repo.confirm({ id: lookalike, owner: 'a' }, { ttlMs: LONG_TTL_MS }), false);
    assert.equal(await repo.remove(lookalike), false);
    assert.equal((await repo.get(bytes))?.state, 'in-flight');
    assert.equal((await repo.add(lookalike, { ttlMs: LONG_TTL_MS })).added, true);

    const text = `\u0000b64:${Buffer.from(uniqueId()).toString('base64')}`;
    const looksLikeIt = Buffer.from(text.slice(5), 'base64');
    assert.equal((await repo.add(text, { ttlMs: LONG_TTL_MS })).added, true);
    assert.equal(await repo.contains(looksLikeIt), false);
    assert.equal((await repo.add(looksLikeIt, { ttlMs: LONG_TTL_MS })).added, true);
  });
}
