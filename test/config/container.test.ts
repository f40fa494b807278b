import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { z } from 'zod';
import { configSections, loadConfig } from '../../src/config/index.js';
import type { IdempotentConsumer } from '../../src/consumer/index.js';
import {
  buildContainer,
  CONSUMER,
  consumerOf,
  createContainer,
  disposeContainer,
  REPOSITORY,
  repositoryOf,
} from '../../src/di/index.js';
import { ConfigError } from '../../src/errors.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import type { IdempotentRepository } from '../../src/store/types.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

const schema = z.object(configSections).strict();

interface Order {
  readonly orderId: string;
  readonly amount: number;
}

/** The application code under test: it knows nothing about which store the container chose. */
async function chargeAll(consumer: IdempotentConsumer<Order>, orders: readonly Order[]): Promise<string[]> {
  const charged: string[] = [];
  const charge = consumer.wrap(async (order: Order) => {
    charged.push(order.orderId);
  });
  for (const order of orders) await charge(order);
  return charged;
}

const orders: Order[] = [
  { orderId: 'o-1', amount: 10 },
  { orderId: 'o-2', amount: 20 },
  { orderId: 'o-1', amount: 10 },
  { orderId: 'o-3', amount: 30 },
  { orderId: 'o-2', amount: 20 },
];

async function chargeWith(toml: string): Promise<{ charged: string[]; consumer: IdempotentConsumer<Order> }> {
  const config = await loadConfig(schema, { path: 'app.toml', text: toml, env: {} });
  const container = await buildContainer<Order>(config);
  try {
    const consumer = consumerOf<Order>(container);
    assert.equal(container.resolve(CONSUMER), consumer, 'the consumer is a singleton of its container');
    assert.equal(consumer.repository, container.resolve<IdempotentRepository>(REPOSITORY));
    return { charged: await chargeAll(consumer, orders), consumer };
  } finally {
    await disposeContainer(container);
  }
}

describe('DI container', () => {
  test('memory store from config: duplicates are charged once', async () => {
    const { charged, consumer } = await chargeWith(`
      [repository]
      type = "memory"
      [consumer]
      id = "orderId"
      ttl = "1h"
    `);
    assert.deepEqual(charged, ['o-1', 'o-2', 'o-3']);
    assert.equal(consumer.options.ttlMs, 3_600_000);
    assert.equal(consumer.stats.duplicate, 2);
  });

  test('switching to rocksdb is a config change: same handler code, same result', {
    skip: skipUnlessEnabled('rocksdb'),
  }, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'idem-di-'));
    try {
      const { charged, consumer } = await chargeWith(`
        [repository]
        type = "rocksdb"
        path = ${JSON.stringify(join(dir, 'store'))}
        [consumer]
        id = "orderId"
        mode = "lazy"
      `);
      assert.deepEqual(charged, ['o-1', 'o-2', 'o-3']);
      assert.equal(consumer.options.mode, 'lazy');
      assert.equal(consumer.repository.capabilities.persistent, true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('code options win over config and the repository is reachable by token', async () => {
    const config = await loadConfig(schema, { text: '[repository]\ntype = "memory"\n', env: {} });
    const container = await buildContainer<Order>(config, { id: (o) => `${o.orderId}:${o.amount}` });
    try {
      const consumer = consumerOf<Order>(container);
      assert.deepEqual(await chargeAll(consumer, orders), ['o-1', 'o-2', 'o-3']);
      assert.equal(await repositoryOf(container).contains('o-1:10'), true);
    } finally {
      await disposeContainer(container);
    }
  });

  test('a consumer without an id is a ConfigError naming consumer.id', async () => {
    const config = await loadConfig(schema, { text: '[repository]\ntype = "memory"\n', env: {} });
    const container = await buildContainer(config);
    try {
      assert.throws(
        () => consumerOf(container),
        (e: unknown) => e instanceof ConfigError && e.key === 'consumer.id',
      );
    } finally {
      await disposeContainer(container);
    }
  });

  test('createContainer registers a repository opened by hand', async () => {
    const config = await loadConfig(schema, { text: '[consumer]\nid = "orderId"\n', env: {} });
    const repository = new MemoryRepository();
    const container = createContainer<Order>(config, repository);
    try {
      assert.equal(repositoryOf(container), repository);
      assert.deepEqual(await chargeAll(consumerOf<Order>(container), orders), ['o-1', 'o-2', 'o-3']);
    } finally {
      await disposeContainer(container);
    }
  });
});
