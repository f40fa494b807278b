/**
 * The contract of the Kafka port (src/kafka/port): what every implementation (src/kafka/kafkajs,
 * src/kafka/platformatic, or your own) must do, against a real broker, grouped per feature as abstract-level's
 * and keyv's store suites are. Each test opens its own client and owns what it creates (random topic, group and
 * transactional ids), deleting it afterwards, so the suite runs beside other Kafka tests. Where the clients differ
 * by design, the client's capabilities decide what is asserted, never its name.
 *
 *     for (const name of kafkaClientNames) describe(name, () => kafkaPortContract(name));
 */
import { describe } from 'node:test';
import type { KafkaClientName } from '../../../src/kafka/port/index.js';
import { adminTests } from './admin.js';
import { commitTests } from './commits.js';
import { consumeTests } from './consume.js';
import { errorTests } from './errors.js';
import { lifecycleTests } from './lifecycle.js';
import { produceTests } from './produce.js';
import { readerTests } from './reader.js';
import { rebalanceTests } from './rebalance.js';
import { transactionTests } from './transactions.js';

/** Registers the contract's tests for the client `name` (call it inside a describe, or at the top level). */
export function kafkaPortContract(name: KafkaClientName): void {
  describe('produce', () => produceTests(name));
  describe('consume batches', () => consumeTests(name));
  describe('manual commits', () => commitTests(name));
  describe('pause, stop, disconnect', () => lifecycleTests(name));
  describe('rebalance', () => rebalanceTests(name));
  describe('transactions', () => transactionTests(name));
  describe('admin', () => adminTests(name));
  describe('partition reader', () => readerTests(name));
  describe('errors', () => errorTests(name));
}
