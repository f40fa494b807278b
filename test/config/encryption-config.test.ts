import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { z } from 'zod';
import { configSections, loadConfig, openConsumer } from '../../src/config/index.js';

// `[consumer.encryption]`: the keys of kept outcomes from config (a file or IDEM__ variables), never printed.

const schema = z.object(configSections).strict();

describe('[consumer.encryption] in config', () => {
  it('builds a consumer whose kept outcomes are encrypted with the configured key', async (t) => {
    const key = randomBytes(32).toString('base64');
    const text =
      '[repository]\ntype = "memory"\n[consumer]\nid = "id"\nfailureMessage = "name"\n' +
      `[consumer.encryption]\ncurrentKeyId = "k1"\nkeys = { k1 = "${key}" }\n`;
    const config = await loadConfig(schema, { text, env: {} });
    const { repository, consumer } = await openConsumer<{ id: string }>(config, {
      consumer: { storeResult: true },
    });
    t.after(() => repository.close());
    await consumer.process({ id: 'a' }, () => 'secret value');
    assert.match((await repository.get('a'))?.result ?? '', /^xk1\./);
    assert.equal((await consumer.process({ id: 'a' }, () => 'again')).result, 'secret value');
  });

  it('refuses a bad key with an error that names the option and does not print the key', async () => {
    const short = Buffer.from('too-short-to-be-a-key').toString('base64');
    const text =
      '[repository]\ntype = "memory"\n[consumer]\nid = "id"\n' +
      `[consumer.encryption]\ncurrentKeyId = "k1"\nkeys = { k1 = "${short}" }\n`;
    const config = await loadConfig(schema, { text, env: {} });
    await assert.rejects(openConsumer(config), (error: unknown) => {
      assert.match(String(error), /encryption\.keys\.k1.*must be 32 bytes/);
      assert.ok(!String(error).includes(short));
      return true;
    });
    // A malformed table is refused by the config check, its values redacted.
    await assert.rejects(
      loadConfig(schema, {
        text: `[repository]\ntype = "memory"\n[consumer.encryption]\ncurrentKeyId = "k1"\nkeys = "${short}"\n`,
        env: {},
      }),
      (error: unknown) => {
        assert.match(String(error), /consumer\.encryption\.keys/);
        assert.ok(!String(error).includes(short), String(error));
        return true;
      },
    );
  });
});
