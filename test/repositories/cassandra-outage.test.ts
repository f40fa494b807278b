import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { IdempotentConsumer, type ProcessResult } from '../../src/consumer/index.js';
import { RepositoryError } from '../../src/errors.js';
import { CassandraRepository } from '../../src/repositories/cassandra/index.js';
import { closeAfter, endpoints, skipUnlessEnabled } from '../helpers/stores.js';

/**
 * A Cassandra node cannot be restarted cheaply, so an outage is simulated by freezing its process (SIGSTOP):
 * connections stay open but nothing answers, which is the worst case for a client (no fast "connection refused").
 * The node is ALWAYS resumed (SIGCONT) in finally blocks, an after hook and on process exit.
 */

const connection = {
  contactPoints: [...endpoints.cassandraContactPoints],
  keyspace: 'idem_test',
  table: 'contract_ids',
  // Low, so a frozen node turns into prompt timeouts rather than the default 12 s wait.
  requestTimeoutMs: 400,
};

/** Outage window: long enough for several timed-out calls, short enough not to upset the node. */
const FREEZE_CALLS = 4;

/** The pid of the local Cassandra: CASSANDRA_PID, the stack's pid file, or the one CassandraDaemon process. */
function cassandraPid(): number {
  if (process.env.CASSANDRA_PID) return Number(process.env.CASSANDRA_PID);
  const isCassandra = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('CassandraDaemon');
    } catch {
      return false;
    }
  };
  const pidFile = '.stack/pids/cassandra.pid';
  if (existsSync(pidFile)) {
    const pid = Number(readFileSync(pidFile, 'utf8').trim().split(/\s+/)[0]);
    if (isCassandra(pid)) return pid;
  }
  let found: number[] = [];
  try {
    found = execFileSync('pgrep', ['-f', 'CassandraDaemon'], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number)
      .filter(isCassandra);
  } catch {
    // pgrep exits 1 when nothing matches.
  }
  if (found.length !== 1) {
    throw new Error(
      `outage test needs exactly one local Cassandra process (found ${found.length}); set CASSANDRA_PID ` +
        'or opt out with IDEM_SKIP_STORES=cassandra',
    );
  }
  return found[0] as number;
}

describe('cassandra outage (node frozen with SIGSTOP)', { skip: skipUnlessEnabled('cassandra') }, () => {
  let pid = 0;
  let frozen = false;
  const thaw = () => {
    if (!frozen) return;
    process.kill(pid, 'SIGCONT');
    frozen = false;
  };
  const freeze = () => {
    frozen = true;
    process.kill(pid, 'SIGSTOP');
  };

  before(async () => {
    pid = cassandraPid();
    process.on('exit', thaw);
    // Schema first, with the default timeout: a DDL must not race the low test timeout.
    const schema = await CassandraRepository.connect({
      ...connection,
      requestTimeoutMs: 12_000,
      createSchema: true,
    });
    await schema.close();
  });
  after(() => {
    thaw();
    process.off('exit', thaw);
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
