import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openRepository } from '../../src/config/repository.js';
import { ConfigError } from '../../src/errors.js';
import {
  KafkaRepository,
  kafkaDefaults,
  parseKafkaOptions,
  repositoryModule,
} from '../../src/repositories/kafka/index.js';
import { loadRepositoryModule } from '../../src/repositories/registry.js';
import { createTopic, kafkaAdmin, randomName, testKafka, testKafkaClientName } from '../helpers/kafka.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const brokers = [...endpoints.kafkaBrokers];

/** Asserts a ConfigError keyed `key` whose message matches `pattern`. */
function configError(key: string, pattern: RegExp) {
  return (error: unknown) => {
    assert.ok(error instanceof ConfigError, String(error));
    assert.equal(error.key, key);
    assert.match(error.message, pattern);
    return true;
  };
}

describe('kafka repository options', () => {
  it('is selected by repository.type = "kafka" and applies the defaults written once in options.ts', async () => {
    assert.equal(await loadRepositoryModule('kafka'), repositoryModule);
    const parsed = repositoryModule.optionsSchema.parse({ brokers, topic: 'marks' });
    assert.equal(parsed.partitions, kafkaDefaults.partitions);
    assert.equal(parsed.retention, kafkaDefaults.retentionMs);
    assert.equal(parsed.clientId, kafkaDefaults.clientId);
    assert.equal(parsed.ssl, false);
    assert.equal(parseKafkaOptions({ brokers, topic: 't', retention: '3h' }).retention, 3 * 3_600_000);
  });

  it('reads ttl and its older name retention alike, and refuses both with different values', () => {
    const ttl = parseKafkaOptions({ brokers, topic: 't', ttl: '3h' });
    assert.deepEqual(ttl, parseKafkaOptions({ brokers, topic: 't', retention: '3h' }));
    assert.equal(ttl.ttl, 3 * 3_600_000);
    assert.equal(parseKafkaOptions({ brokers, topic: 't' }).ttl, kafkaDefaults.ttlMs);
    assert.equal(parseKafkaOptions({ brokers, topic: 't', ttl: '3h', retention: '180m' }).ttl, 3 * 3_600_000);
    assert.throws(
      () => parseKafkaOptions({ brokers, topic: 't', ttl: '3h', retention: '2h' }),
      configError(
        'repository.retention',
        /is the older name of ttl.*7200000 ms and ttl = 10800000 ms differ/,
      ),
    );
  });

  it('names the offending key in every config error', () => {
    assert.throws(() => parseKafkaOptions({ topic: 't' }), configError('repository.brokers', /brokers/));
    assert.throws(
      () => parseKafkaOptions({ brokers }),
      configError('repository.topic', /topic.*is required/),
    );
    assert.throws(
      () => parseKafkaOptions({ brokers, topic: 'no spaces' }),
      configError('repository.topic', /must be a Kafka topic name/),
    );
    assert.throws(
      () => parseKafkaOptions({ brokers, topic: 't', partitions: 0 }),
      configError('repository.partitions', /partitions/),
    );
    assert.throws(
      () => parseKafkaOptions({ brokers, topic: 't', retention: 'soon' }),
      configError('repository.retention', /must be a duration/),
    );
    assert.throws(
      () =>
        parseKafkaOptions({
          brokers,
          topic: 't',
          sasl: { mechanism: 'plain', username: 'u', password: 'p' },
        }),
      configError('repository.sasl', /SASL without TLS.*repository\.ssl = true/),
    );
    assert.throws(
      () => parseKafkaOptions({ brokers, topic: 't', bogus: 1 }),
      configError('repository.bogus', /bogus/),
    );
  });

  it('rejects an existing topic with another partition count, naming repository.topic', {
    skip: skipUnlessEnabled('kafka'),
  }, async (t) => {
    const admin = await kafkaAdmin(t, testKafka());
    const topic = await createTopic(t, admin, { partitions: 2 });
    await assert.rejects(
      openRepository({
        repository: { type: 'kafka', brokers, client: testKafkaClientName(), topic, partitions: 3 },
      }),
      configError(
        'repository.topic',
        new RegExp(`changelog topic "${topic}" has 2 partitions, but it must have 3`),
      ),
    );
  });

  it('creates a missing topic compacted, with the configured partitions and retention', {
    skip: skipUnlessEnabled('kafka'),
  }, async (t) => {
    const admin = await kafkaAdmin(t, testKafka());
    const topic = randomName('idem-repo');
    t.after(() => admin.deleteTopics({ topics: [topic] }).catch(() => undefined));
    const repo = await KafkaRepository.open({
      brokers,
      client: testKafkaClientName(),
      topic,
      partitions: 2,
      retention: '2h',
      replicationFactor: 1,
    });
    await repo.close();
    const [metadata] = (await admin.fetchTopicMetadata({ topics: [topic] })).topics;
    assert.equal(metadata?.partitions.length, 2);
    const described = await admin.describeConfigs({
      resources: [{ type: 2, name: topic, configNames: ['cleanup.policy', 'retention.ms'] }],
      includeSynonyms: false,
    });
    const entries = described.resources[0]?.configEntries ?? [];
    assert.equal(entries.find((e) => e.configName === 'cleanup.policy')?.configValue, 'compact,delete');
    assert.equal(entries.find((e) => e.configName === 'retention.ms')?.configValue, String(2 * 3_600_000));
    assert.equal(repo.capabilities.maxTtlMs, 2 * 3_600_000);
  });
});
