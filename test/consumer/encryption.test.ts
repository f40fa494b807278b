import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { ConfigError, StoredFailureError, StoredOutcomeError } from '../../src/errors.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import type { IdempotentRepository } from '../../src/store/types.js';
import { testStores } from './real-stores.js';

// Kept outcomes encrypted at rest (AES-256-GCM), with key ids for rotation, failing closed.

type Msg = { id: string };
const k1 = randomBytes(32);
const k2 = randomBytes(32).toString('base64');
const SECRET = 'card 4242 4242 4242 4242';
/** `{ note: 'written before dotted key ids' }` kept for id "legacy", sealed before key ids could hold dots. */
const LEGACY_K1 =
  'xk1.73CPh9jQ_-pdKrra_tb9W1ej1X5LKVYthha2gjGjmU531bqP2W48r5kAB3iCURBx7AdNeHQg7I5yMQ6sMZPq9GbLYZif';
const LEGACY_DOTTED =
  'x2026.12.8Up84eFxk211lToc7fFroilPHtlfGqGC3A2h3RkRpgo0UYDQUv-KeVJVxG9TA57ElclniNRz4AxKOQDn11hvgXSNWRjZ';

function consumer(
  repository: IdempotentRepository,
  keys: Record<string, string | Uint8Array>,
  current: string,
  extra = {},
) {
  return new IdempotentConsumer<Msg>({
    repository,
    id: 'id',
    storeResult: true,
    removeOnFailure: false,
    encryption: { keys, currentKeyId: current },
    ...extra,
  });
}

/** Rewrites the id's kept outcome as `result` (a lazy mark carries it), as someone with store access could. */
async function plant(repository: IdempotentRepository, id: string, result: string): Promise<void> {
  await repository.remove(id);
  await repository.add(id, { ttlMs: 60_000 }, { result });
}

for (const store of testStores) {
  describe(`encrypted outcomes on ${store.name}`, { skip: store.skip }, () => {
    it('keeps values and failures encrypted, replays them, and rotates keys by key id', async (t) => {
      const repository = await store.open(t);
      const old = consumer(repository, { k1 }, 'k1');
      let runs = 0;
      await old.process({ id: 'v' }, () => {
        runs++;
        return { note: SECRET };
      });
      await assert.rejects(
        old.process({ id: 'f' }, () => {
          runs++;
          throw new Error(`declined: ${SECRET}`);
        }),
      );
      for (const id of ['v', 'f']) {
        const kept = (await repository.get(id))?.result ?? '';
        assert.match(kept, /^xk1\./);
        assert.ok(!kept.includes('4242'), kept);
      }
      // Rotation: the new current key writes, the old one still reads.
      const rotated = consumer(repository, { k1, k2 }, 'k2');
      assert.deepEqual((await rotated.process({ id: 'v' }, () => 'ran again')).result, { note: SECRET });
      await assert.rejects(
        rotated.process({ id: 'f' }, () => 'ran again'),
        (error: unknown) => {
          assert.ok(error instanceof StoredFailureError);
          assert.match(error.message, /declined: card 4242/);
          return true;
        },
      );
      await rotated.process({ id: 'w' }, () => 'new');
      assert.match((await repository.get('w'))?.result ?? '', /^xk2\./);
      assert.equal(runs, 2);
    });

    it('dotted key ids (2026.12, key.v2) write, read, rotate; records written before still read', async (t) => {
      const repository = await store.open(t);
      const dated = consumer(repository, { '2026.12': k1 }, '2026.12');
      let runs = 0;
      await dated.process({ id: 'v' }, () => {
        runs++;
        return { note: SECRET };
      });
      await assert.rejects(
        dated.process({ id: 'f' }, () => {
          runs++;
          throw new Error(`declined: ${SECRET}`);
        }),
      );
      assert.match((await repository.get('v'))?.result ?? '', /^x2026\.12\.[A-Za-z0-9_-]+$/);
      assert.deepEqual((await dated.process({ id: 'v' }, () => 'ran again')).result, { note: SECRET });
      // Rotation to another dotted id: the old key still reads its records, failures replay.
      const rotated = consumer(repository, { '2026.12': k1, 'key.v2': k2 }, 'key.v2');
      assert.deepEqual((await rotated.process({ id: 'v' }, () => 'ran again')).result, { note: SECRET });
      await assert.rejects(
        rotated.process({ id: 'f' }, () => 'ran again'),
        StoredFailureError,
      );
      await rotated.process({ id: 'w' }, () => 'new');
      assert.match((await repository.get('w'))?.result ?? '', /^xkey\.v2\./);
      assert.equal((await rotated.process({ id: 'w' }, () => 'ran again')).result, 'new');
      // A key id that is a prefix of a configured one is still unknown, not a near match.
      await assert.rejects(
        consumer(repository, { key: k1 }, 'key').process({ id: 'w' }, () => 'ran again'),
        (error: unknown) => error instanceof StoredOutcomeError && /key id "key\.v2"/.test(error.message),
      );
      assert.equal(runs, 2);
      // Sealed by the code before this change (fixed key of 32 bytes of 7): an undotted key id read then and
      // still does; a dotted one was written then but could not be read, and reads now.
      const legacyKey = Buffer.alloc(32, 7);
      for (const [keyId, sealed] of [
        ['k1', LEGACY_K1],
        ['2026.12', LEGACY_DOTTED],
      ] as const) {
        await plant(repository, 'legacy', sealed);
        const reader = consumer(repository, { [keyId]: legacyKey }, keyId);
        const { result } = await reader.process({ id: 'legacy' }, () => 'ran again');
        assert.deepEqual(result, { note: 'written before dotted key ids' });
      }
    });

    it('fails closed: unknown key id, altered record, record copied to another id, plaintext', async (t) => {
      const repository = await store.open(t);
      const writer = consumer(repository, { k1 }, 'k1');
      await writer.process({ id: 'a' }, () => 'value of a');
      const sealed = (await repository.get('a'))?.result as string;
      let runs = 0;
      const handler = () => {
        runs++;
        return 'ran again';
      };
      const unreadable = (reason: RegExp) => (error: unknown) => {
        assert.ok(error instanceof StoredOutcomeError, String(error));
        assert.match(error.message, reason);
        assert.equal(error.code, 'IDEM_ERR_STORED_OUTCOME');
        return true;
      };
      // Only the new key: the old record cannot be read, and is not run again either.
      await assert.rejects(
        consumer(repository, { k2 }, 'k2').process({ id: 'a' }, handler),
        unreadable(/key id "k1", which is not among the configured keys/),
      );
      // Altered ciphertext.
      const last = sealed.at(-2) === 'A' ? 'B' : 'A';
      await plant(repository, 'b', `${sealed.slice(0, -2)}${last}${sealed.at(-1)}`);
      await assert.rejects(writer.process({ id: 'b' }, handler), unreadable(/does not authenticate/));
      // Copied whole to another id: the id is authenticated with it.
      await plant(repository, 'c', sealed);
      await assert.rejects(writer.process({ id: 'c' }, handler), unreadable(/does not authenticate/));
      // Plaintext, written before encryption (or planted): refused unless allowPlaintext.
      await new IdempotentConsumer<Msg>({ repository, id: 'id', storeResult: true }).process(
        { id: 'p' },
        () => 'plain',
      );
      await assert.rejects(writer.process({ id: 'p' }, handler), unreadable(/not encrypted/));
      const migrating = consumer(repository, { k1 }, 'k1', {
        encryption: { keys: { k1 }, currentKeyId: 'k1', allowPlaintext: true },
      });
      assert.equal((await migrating.process({ id: 'p' }, handler)).result, 'plain');
      // A consumer without keys does not mistake an encrypted outcome for a value either.
      await assert.rejects(
        new IdempotentConsumer<Msg>({ repository, id: 'id', storeResult: true }).process(
          { id: 'a' },
          handler,
        ),
        unreadable(/no encryption keys/),
      );
      assert.equal(runs, 0);
    });
  });
}

describe('encryption options', () => {
  it('refuses a key of the wrong size or an unknown current key id, naming the option and not the key', () => {
    const repository = new MemoryRepository();
    const short = Buffer.from('a-secret-that-is-too-short').toString('base64');
    assert.throws(
      () => consumer(repository, { k1: short }, 'k1'),
      (error: unknown) =>
        error instanceof ConfigError &&
        /option encryption\.keys\.k1 of new IdempotentConsumer\(\.\.\.\): must be 32 bytes/.test(
          error.message,
        ) &&
        !error.message.includes(short) &&
        !error.message.includes('a-secret'),
    );
    assert.throws(
      () => consumer(repository, { k1 }, 'k9'),
      /option encryption\.currentKeyId of new IdempotentConsumer\(\.\.\.\): must name one of the keys \(k1\)/,
    );
    assert.throws(() => consumer(repository, { 'bad id': k1 }, 'bad id'), /key id "bad id" must be/);
  });
});
