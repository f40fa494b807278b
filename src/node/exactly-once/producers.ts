import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { ConfigError } from '../../errors.js';
import type { GroupMetadata, KafkaClientCapabilities } from '../../kafka/port/index.js';
import { type NodeConfig, nodeDefaults } from '../options.js';

/** How an exactly-once node's transactional producers are laid out (see docs/node.md). */
export type TransactionalProducerLayout = 'per-partition' | 'per-instance';

/**
 * `output.transactionalProducer`, resolved against the client: per-instance needs a client that sends the
 * consumer group's generation with a transaction's offsets (KIP-447), since the group, not the transactional id,
 * then fences a zombie. kafkajs does not, so per-instance is refused there rather than run without fencing.
 */
export function transactionalProducerLayout(
  config: NodeConfig,
  capabilities: KafkaClientCapabilities,
): TransactionalProducerLayout {
  const asked = config.output.transactionalProducer;
  if (asked === 'per-instance' && !capabilities.fencesByGroup) {
    throw new ConfigError(
      'output.transactionalProducer',
      `"per-instance" needs a Kafka client that sends the group's generation with a transaction's offsets ` +
        `(kafka.client = "platformatic"); the client in use (${config.kafka.client}) does not, so a zombie could not be ` +
        'fenced. Use "per-partition" (the default on this client)',
    );
  }
  return asked ?? (capabilities.fencesByGroup ? 'per-instance' : 'per-partition');
}

/**
 * `output.transactionTimeout`, or the layout's default: per-partition a new owner's init aborts a crashed owner's
 * transaction, so the timeout only matters when nobody takes the partition; per-instance only the timeout ends
 * a crashed instance's transaction, so it is shorter (30 s; see nodeDefaults.instanceTransactionTimeoutMs).
 */
export function transactionTimeoutMs(config: NodeConfig, layout: TransactionalProducerLayout): number {
  return (
    config.output.transactionTimeout ??
    (layout === 'per-instance'
      ? nodeDefaults.instanceTransactionTimeoutMs
      : nodeDefaults.transactionTimeoutMs)
  );
}

/**
 * The file that keeps this instance's id across restarts: beside a RocksDB store (`<path>.instance-id`) or beside
 * a configured changelog checkpoint. Undefined when nothing local survives a restart (the id is then new per
 * process, and a crashed process's open transaction holds its partitions' output until the broker aborts it).
 */
export function instanceIdFile(config: NodeConfig): string | undefined {
  const repository = config.repository as { type?: string; path?: string };
  if (repository.type === 'rocksdb' && repository.path) return `${repository.path}.instance-id`;
  if (config.changelog.checkpoint !== undefined) return `${config.changelog.checkpoint}.instance-id`;
  return undefined;
}

const INSTANCE_ID = /^[A-Za-z0-9._-]{1,100}$/;

/**
 * This instance's id: `output.instanceId`, else the one kept in {@link instanceIdFile} (created on first use),
 * else a new random one. A file that cannot be read or holds something else fails naming it: a silently new id
 * would leave the previous run's open transaction in place until the broker's timeout.
 */
export function resolveInstanceId(config: NodeConfig): { id: string; source: string } {
  if (config.output.instanceId !== undefined)
    return { id: config.output.instanceId, source: 'output.instanceId' };
  const file = instanceIdFile(config);
  if (file === undefined) return { id: randomUUID(), source: 'new for this process' };
  let text: string | undefined;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new ConfigError('output.instanceId', `cannot read the instance id file ${file}`, {
        cause: error,
      });
    }
  }
  if (text !== undefined) {
    const id = text.trim();
    if (!INSTANCE_ID.test(id)) {
      throw new ConfigError(
        'output.instanceId',
        `${file} does not hold an instance id (letters, digits, ".", "_" or "-"); delete it to get a new one`,
      );
    }
    return { id, source: file };
  }
  const id = randomUUID();
  mkdirSync(dirname(file), { recursive: true });
  // Written whole or not at all: a crash mid-write must not leave a half id behind.
  writeFileSync(`${file}.tmp`, `${id}\n`);
  renameSync(`${file}.tmp`, file);
  return { id, source: file };
}

/**
 * Raised by a chunk's transaction when the consumer group moved to another generation (or member id) while the
 * chunk ran: its offsets would be sent with a generation it was not read in, so it is aborted and the records
 * are read again under the new one. The node treats it as fenced.
 */
export class GenerationMovedError extends Error {
  override readonly name = 'GenerationMovedError';
  constructor(before: GroupMetadata, now: GroupMetadata) {
    super(
      `group ${before.groupId}: the chunk was read in generation ${before.generationId} (member ` +
        `${before.memberId}) and the member is now in ${now.generationId ?? 'none'} (${now.memberId ?? 'none'}); ` +
        'its transaction is aborted',
    );
  }
}

/** True when both name the same generation of the same member (a client that knows none always matches). */
export function sameGeneration(a: GroupMetadata, b: GroupMetadata): boolean {
  return a.generationId === b.generationId && a.memberId === b.memberId;
}
