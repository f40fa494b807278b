/**
 * A server whose sessions start with autocommit off (`autocommit = 0` in its config, as some shops set): the
 * store's own pool must still commit each claim outside a transaction, or every claim stays in a transaction that
 * never ends, invisible to other workers and holding its row lock until the connection closes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MySqlRepository } from '../../src/repositories/mysql/index.js';
import { OwnMariadb } from '../helpers/own-mariadb.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

const MINUTE = 60_000;

describe('mysql store on a server with autocommit off', { skip: skipUnlessEnabled('mysql') }, () => {
  let server: OwnMariadb;
  before(async () => {
    server = await OwnMariadb.start(['--autocommit=0']);
  });
  after(async () => {
    await server?.destroy();
  });

  it('a claim made by one worker is seen by another at once, and a mark survives the worker', async () => {
    const open = () =>
      MySqlRepository.open({
        url: server.url,
        namespace: 'autocommit',
        createTable: true,
        lockTimeoutMs: 2_000,
      });
    const first = await open();
    const second = await open();
    try {
      const claimed = await first.add('a', { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'first' });
      assert.equal(claimed.added, true);
      // Uncommitted, the second worker's claim would wait on the row lock and then fail.
      const again = await second.add('a', { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'second' });
      assert.equal(again.added, false);
      await first.add('b', { ttlMs: MINUTE });
    } finally {
      await first.close();
    }
    // The first worker's connections are gone: only what it committed is left.
    const b = await second.add('b', { ttlMs: MINUTE });
    assert.equal(b.added, false, 'the lazy mark of a closed worker was rolled back');
    await second.close();
  });
});
