import assert from 'node:assert/strict';
import { type ContractSuite, claimBy, LONG_TTL_MS, repoTest, uniqueId } from './context.js';

/** Owner and fingerprint strings that break naive record encodings. */
const AWKWARD = [
  'a\u0001b',
  '\u0001',
  'c\u00011\u0001\u0001x\u0001\u0001',
  'nul\u0000inside',
  '\u0000',
  'line\nbreak\r\n',
  'emoji 😀 and 日本語',
  '{"state":"confirmed","owner":"x","expiresAt":1}',
  '["f",1,2,"o"]',
  '\\u0001 "quoted" \\',
  ' padded ',
  'tab\tand\u2028separator',
];

export function recordTests(suite: ContractSuite): void {
  const test = repoTest(suite);
  test('any owner and fingerprint string round-trips through a stored record', async (repo) => {
    for (const [i, text] of AWKWARD.entries()) {
      const label = JSON.stringify(text);
      const id = uniqueId(`rec${i}`);
      const fingerprint = `${text}|fp`;
      const added = await repo.add(id, claimBy(text), { fingerprint, eventTime: 1_700_000_000_000 + i });
      assert.equal(added.added && added.record.owner, text, label);
      const stored = await repo.get(id);
      assert.equal(stored?.owner, text, `owner ${label}`);
      assert.equal(stored?.fingerprint, fingerprint, `fingerprint ${label}`);
      assert.equal(stored?.eventTime, 1_700_000_000_000 + i, `eventTime next to ${label}`);
      const blocked = await repo.add(id, claimBy('other'));
      assert.equal(!blocked.added && blocked.existing.owner, text, `owner ${label} in add's answer`);
      assert.equal(!blocked.added && blocked.existing.fingerprint, fingerprint, `fingerprint ${label}`);
      // An owner token is compared whole: a part of it, or more than it, is another owner.
      for (const impostor of [text.slice(0, -1), `${text}x`, text.split('\u0001')[0] as string]) {
        if (impostor === text || impostor === '') continue;
        assert.equal(
          await repo.confirm({ id, owner: impostor }, { ttlMs: LONG_TTL_MS }),
          false,
          `${JSON.stringify(impostor)} confirmed the claim of ${label}`,
        );
      }
      assert.equal(await repo.confirm({ id, owner: text }, { ttlMs: LONG_TTL_MS }), true, label);
      const confirmed = await repo.get(id);
      assert.equal(confirmed?.state, 'confirmed', label);
      assert.equal(confirmed?.fingerprint, fingerprint, `fingerprint ${label} after confirm`);
    }
  });

  test('any fingerprint round-trips through a batch add, per entry', async (repo) => {
    const entries = AWKWARD.map((fingerprint, i) => ({ id: uniqueId(`batch${i}`), fingerprint }));
    const results = await repo.addMany(entries, { ttlMs: LONG_TTL_MS });
    assert.deepEqual(
      results.map((r) => r.added && r.record.fingerprint),
      AWKWARD,
    );
    const stored = await repo.getMany(entries.map((e) => e.id));
    assert.deepEqual(
      stored.map((r) => r?.fingerprint),
      AWKWARD,
    );
    const again = await repo.addMany(entries, { ttlMs: LONG_TTL_MS });
    assert.deepEqual(
      again.map((r) => !r.added && r.existing.fingerprint),
      AWKWARD,
    );
  });
}
