// @kafka-client-pinned: runs every client itself
/*
 * The Kafka port contract (test/kafka/port-contract/) on every client the package has, in one file: what keeps
 * the two implementations alike without re-running the node's whole suites on each. Against the test broker
 * (KAFKA_BROKERS); `--test-name-pattern=platformatic` runs one client.
 */
import { describe } from 'node:test';
import { kafkaClientNames } from '../../src/kafka/port/index.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { kafkaPortContract } from './port-contract/index.js';

describe('Kafka port contract', {
  skip: skipUnlessEnabled('kafka'),
  concurrency: kafkaClientNames.length,
}, () => {
  for (const name of kafkaClientNames) describe(name, { timeout: 120_000 }, () => kafkaPortContract(name));
});
