import { after, describe } from 'node:test';
import { Kafka, logLevel } from 'kafkajs';
import { KafkaRepository } from '../../src/repositories/kafka/index.js';
import { repositoryContract } from '../contract/index.js';
import { testKafkaClientName } from '../helpers/kafka.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

// One topic per contract namespace, so reopening a namespace reads the same marks back.
const topics = new Set<string>();

describe('kafka', { skip: skipUnlessEnabled('kafka') }, () => {
  after(async () => {
    const admin = new Kafka({ brokers: [...endpoints.kafkaBrokers], logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    await admin.deleteTopics({ topics: [...topics] }).catch(() => undefined);
    await admin.disconnect();
  });

  repositoryContract({
    name: 'kafka',
    factory: ({ namespace }) => {
      // Topic names allow no ':' (the nested namespace test extends a namespace with ':orders').
      const topic = `idem-repo-${namespace.replace(/[^a-zA-Z0-9._-]/g, '_')}`;
      topics.add(topic);
      return KafkaRepository.open({
        brokers: [...endpoints.kafkaBrokers],
        client: testKafkaClientName(),
        topic,
        replicationFactor: 1,
      });
    },
    capabilities: {
      persistent: true,
      shared: false,
      maxIdBytes: 1024,
      nativeBatch: true,
      maxTtlMs: 7 * 86_400_000,
      maxResultBytes: 262_144,
    },
  });
});
