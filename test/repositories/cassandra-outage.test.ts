import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { IdempotentConsumer, type ProcessResult } from '../../src/consumer/index.js';
import { RepositoryError } from '../../src/errors.js';
import { CassandraRepository } from '../../src/repositories/cassandra/index.js';
import { closeAfter, endpoints, skipUnlessEnabled } from '../helpers/stores.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * A Cassandra node cannot be restarted cheaply, and freezing the shared one (SIGSTOP) would stall every other test
 * file running beside this one. So the repositories here reach the shared node through a proxy of this file's own
 * (test/helpers/tcp-proxy.ts), and an outage freezes that proxy: connections stay open but nothing answers, which is
 * what a frozen node looks like to the client and the worst case for it (no fast "connection refused"). The proxy
 * is always thawed in finally blocks and closed after the file.
 */

const [cassandraHost = '127.0.0.1', cassandraPort = '9042'] = (
  endpoints.cassandraContactPoints[0] ?? '127.0.0.1:9042'
).split(':');

/** Outage window: long enough for several timed-out calls. */
const FREEZE_CALLS = 4;

describe('cassandra outage (node frozen: nothing answers)', { skip: skipUnlessEnabled('cassandra') }, () => {
  let proxy: TcpProxy | undefined;
  let connection: {
    contactPoints: string[];
    keyspace: string;
    table: string;
    requestTimeoutMs: number;
  };
  const thaw = () => proxy?.thaw();
  const freeze = () => proxy?.freeze();

  before(async () => {
    proxy = await TcpProxy.start({ host: cassandraHost, port: Number(cassandraPort) });
    connection = {
      contactPoints: [proxy.address],
      keyspace: 'idem_test',
      // Shared with other files; each test here writes under a namespace of its own.
      table: 'contract_ids',
      // Low, so a frozen node turns into prompt timeouts rather than the default 12 s wait.
      requestTimeoutMs: 400,
    };
    // Schema first, with the default timeout: a DDL must not race the low test timeout.
    const schema = await CassandraRepository.connect({
      ...connection,
      requestTimeoutMs: 12_000,
      createSchema: true,
    });
    await schema.close();
  });
  after(async () => {
    thaw();
    await proxy?.close();
  });

  /**
   * Tries fresh ids until one is processed through the store (not fail-open): the driver may need a moment to
   * notice the node answers again. Bounded by attempts, not by time.
   */
  async function untilProcessed(
    handle: (m: { id: string }) => Promise<ProcessResult>,
  ): Promise<ProcessResult> {
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await handle({ id: `after-${randomUUID()}` });
        if (!result.failOpen || attempt >= 60) return result;
      } catch (error) {
        if (!(error instanceof RepositoryError) || attempt >= 60) throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  it('storeFailure "fail": calls reject with RepositoryError, nothing is handled as new, then processing resumes', async (t) => {
    const repository = closeAfter(
      t,
      await CassandraRepository.connect({ ...connection, namespace: `outage-${randomUUID().slice(0, 8)}` }),
    );
    const consumer = new IdempotentConsumer<{ id: string }>({ repository, id: 'id', storeFailure: 'fail' });
    const handled: string[] = [];
    const handle = consumer.wrap(async (message) => {
      handled.push(message.id);
    });
    assert.equal((await handle({ id: 'before' })).outcome, 'processed');

    freeze();
    try {
      for (let i = 0; i < FREEZE_CALLS; i++) {
        await assert.rejects(handle({ id: `during-${i}` }), (error: unknown) => {
          assert.ok(error instanceof RepositoryError, String(error));
          assert.equal(error.retryable, true);
          return true;
        });
      }
    } finally {
      thaw();
    }
    assert.deepEqual(handled, ['before'], 'a message was handled while the store was down');

    assert.equal((await untilProcessed(handle)).outcome, 'processed');
    assert.equal((await handle({ id: 'before' })).outcome, 'duplicate');
    assert.equal(consumer.stats.failOpen, 0);
  });

  it('storeFailure "process": messages are handled as new and counted while the store is down', async (t) => {
    const repository = closeAfter(
      t,
      await CassandraRepository.connect({ ...connection, namespace: `outage-${randomUUID().slice(0, 8)}` }),
    );
    const consumer = new IdempotentConsumer<{ id: string }>({
      repository,
      id: 'id',
      storeFailure: 'process',
    });
    const handled: string[] = [];
    const handle = consumer.wrap(async (message) => {
      handled.push(message.id);
    });
    assert.equal((await handle({ id: 'before' })).outcome, 'processed');

    freeze();
    try {
      for (let i = 0; i < FREEZE_CALLS; i++) {
        const result = await handle({ id: `during-${i}` });
        assert.equal(result.outcome, 'processed');
        assert.equal(result.failOpen, true);
      }
    } finally {
      thaw();
    }
    assert.equal(handled.length, 1 + FREEZE_CALLS);
    assert.equal(consumer.stats.failOpen, FREEZE_CALLS);

    const resumed = await untilProcessed(handle);
    assert.equal(resumed.outcome, 'processed');
    assert.equal(resumed.failOpen, undefined);
    assert.equal((await handle({ id: 'before' })).outcome, 'duplicate');
  });

  it('a repository opened while the node is frozen fails promptly instead of hanging', async () => {
    freeze();
    try {
      await assert.rejects(
        CassandraRepository.connect({ ...connection, connectTimeoutMs: 500, namespace: 'frozen' }),
        (error: unknown) => {
          assert.match(String((error as Error).message), /repository\.contactPoints|cassandra/);
          return true;
        },
      );
    } finally {
      thaw();
    }
  });
});
