/**
 * The repository on a real Redis Cluster: the test starts its own three-master cluster on spare loopback ports
 * (redis-server --cluster-enabled, joined by `redis-cli --cluster create`), runs the shared contract against
 * it, and checks that batches spread over slots and that clear() reaches every master.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { Cluster } from 'ioredis';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import { repositoryContract } from '../contract/index.js';
import { OwnRedis, sparePort } from '../helpers/redis-server.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

const REDIS_CLI = process.env.REDIS_CLI_BIN ?? 'redis-cli';
const TTL = { ttlMs: 60_000 };

/** A three-master cluster owned by this file. */
class OwnCluster {
  readonly nodes: OwnRedis[] = [];
  #dir = '';

  get seeds(): string[] {
    return this.nodes.map((n) => `127.0.0.1:${n.port}`);
  }

  async start(): Promise<void> {
    this.#dir = await mkdtemp(join(tmpdir(), 'idem-redis-cluster-'));
    for (let i = 0; i < 3; i++) {
      const port = await sparePort({ clusterBus: true });
      const node = new OwnRedis(
        port,
        [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          `nodes-${port}.conf`,
          '--cluster-node-timeout',
          '5000',
        ],
        this.#dir,
      );
      this.nodes.push(node);
      await node.start();
    }
    await promisify(execFile)(
      REDIS_CLI,
      ['--cluster', 'create', ...this.seeds, '--cluster-replicas', '0', '--cluster-yes'],
      { timeout: 60_000 },
    );
    // Slots are assigned at once, but every node must agree before commands route cleanly (bounded, ~30 s).
    for (let attempt = 0; ; attempt++) {
      const states = await Promise.all(
        this.nodes.map(async (n) => {
          const { stdout } = await promisify(execFile)(REDIS_CLI, ['-p', String(n.port), 'cluster', 'info']);
          return /cluster_state:ok/.test(stdout);
        }),
      );
      if (states.every(Boolean)) return;
      if (attempt >= 150) throw new Error('redis cluster did not reach cluster_state:ok');
      await sleep(200);
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.kill()));
    if (this.#dir) await rm(this.#dir, { recursive: true, force: true });
  }
}

describe('redis cluster', { skip: skipUnlessEnabled('redis') }, () => {
  const cluster = new OwnCluster();
  before(() => cluster.start(), { timeout: 120_000 });
  after(() => cluster.stop());

  repositoryContract({
    name: 'redis cluster',
    factory: async ({ namespace }) =>
      RedisRepository.open({ cluster: cluster.seeds, keyPrefix: `idem-test:${namespace}:` }),
    capabilities: {
      persistent: true,
      shared: true,
      maxIdBytes: 1024,
      nativeBatch: true,
      maxResultBytes: 1_048_576,
    },
  });

  it('spreads a batch over every master, answers per position, and clear() empties every master', async () => {
    const repo = await RedisRepository.open({ cluster: cluster.seeds, keyPrefix: 'idem-test:spread:' });
    try {
      const ids = Array.from({ length: 3_000 }, (_, i) => `id-${i}`);
      const claims = await repo.addMany(
        ids.map((id) => ({ id })),
        { ...TTL, leaseMs: 60_000, owner: 'w' },
      );
      assert.equal(claims.filter((r) => r.added).length, ids.length);
      const again = await repo.addMany(
        ids.slice(0, 10).map((id) => ({ id })),
        TTL,
      );
      assert.deepEqual(
        again.map((r) => !r.added && r.existing.owner),
        Array(10).fill('w'),
      );
      const confirmed = await repo.confirmMany(
        ids.map((id, i) => ({ id, owner: i === 5 ? 'thief' : 'w' })),
        TTL,
      );
      assert.equal(confirmed.filter(Boolean).length, ids.length - 1);
      assert.equal(confirmed[5], false);

      const masters = (repo.client as Cluster).nodes('master');
      // The namespace's keys all start like the key of any id, minus the id.
      const pattern = `${repo.redisKey('x').slice(0, -1)}*`;
      const mine = () => Promise.all(masters.map(async (node) => (await node.keys(pattern)).length));
      const sizes = await mine();
      assert.equal(masters.length, 3);
      assert.ok(
        sizes.every((n) => n > 0),
        `keys pinned to some masters only: ${sizes.join(', ')}`,
      );

      await repo.clear();
      assert.deepEqual(await repo.containsMany(ids.slice(0, 20)), Array(20).fill(false));
      assert.deepEqual(await mine(), [0, 0, 0]);
    } finally {
      await repo.close();
    }
  });

  it('a {hash tag} in the prefix still pins the namespace to one slot, and every operation works there', async () => {
    const tag = `tenant-${randomUUID().slice(0, 8)}`;
    const repo = await RedisRepository.open({ cluster: cluster.seeds, keyPrefix: `idem-test:{${tag}}:` });
    try {
      const ids = Array.from({ length: 200 }, (_, i) => `id-${i}`);
      const claims = await repo.addMany(
        ids.map((id) => ({ id })),
        { ...TTL, leaseMs: 60_000, owner: 'w' },
      );
      assert.equal(claims.filter((r) => r.added).length, ids.length);
      assert.equal(
        (
          await repo.confirmMany(
            ids.map((id) => ({ id, owner: 'w' })),
            TTL,
          )
        ).filter(Boolean).length,
        200,
      );
      const slots = new Set(
        await Promise.all(
          ids
            .slice(0, 20)
            .map((id) => (repo.client as Cluster).call('CLUSTER', 'KEYSLOT', repo.redisKey(id))),
        ),
      );
      assert.equal(slots.size, 1, 'a hash-tagged namespace spread over several slots');
      await repo.clear();
      assert.deepEqual(await repo.containsMany(ids.slice(0, 5)), Array(5).fill(false));
    } finally {
      await repo.close();
    }
  });
});
