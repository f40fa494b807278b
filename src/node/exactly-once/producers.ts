import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { ConfigError } from '../../errors.js';
import type { GroupMetadata, KafkaClientCapabilities } from '../../kafka/port/index.js';
import { INSTANCE_ID, localFiles, type NodeConfig, nodeDefaults } from '../options.js';

/** What names and keeps this instance's id: `output.instanceId`, or a file beside a local store or checkpoint. */
type InstanceIdSettings = Pick<NodeConfig, 'output' | 'repository' | 'changelog'>;

/** Exactly-once: the node's transactional producers, resolved (the instance id file read or created) once. */
export function transactionalProducers(
  config: NodeConfig,
  capabilities: KafkaClientCapabilities,
  idFile: string | undefined,
) {
  const layout = transactionalProducerLayout(config, capabilities);
  const instance = layout === 'per-instance' ? resolveInstanceId(config, idFile) : undefined;
  return {
    /** Per-instance: the transactional id of the instance's one producer; undefined: one per partition. */
    instanceId: instance && instanceTransactionalId(config, instance.id),
    /** Where the instance id came from (its file, `output.instanceId`, or new for this process). */
    instanceIdFrom: instance?.source,
    /** Per-partition: the transactional id of a partition's producer. */
    partitionId: (partition: number) => transactionalId(config, partition),
    // Per-instance only the timeout ends a crashed instance's transaction: shorter by default.
    timeoutMs:
      config.output.transactionTimeout ??
      (layout === 'per-instance'
        ? nodeDefaults.instanceTransactionTimeoutMs
        : nodeDefaults.transactionTimeoutMs),
  };
}

/** `output.transactionalProducer`, resolved against the client: per-instance needs one that fences by group. */
export function transactionalProducerLayout(
  config: Pick<NodeConfig, 'output' | 'kafka'>,
  capabilities: KafkaClientCapabilities,
) {
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

/** The file that keeps this instance's id across restarts; undefined when nothing local survives one. */
export function instanceIdFile(config: InstanceIdSettings): string | undefined {
  return localFiles(config).instanceId;
}

/**
 * This instance's id: `output.instanceId`, else the one kept in {@link instanceIdFile} (created on first use),
 * else a new one. A file that cannot be read fails naming it: a new id would leave the previous run's transaction open.
 */
export function resolveInstanceId(
  config: InstanceIdSettings,
  file = instanceIdFile(config),
): { id: string; source: string } {
  if (config.output.instanceId !== undefined)
    return { id: config.output.instanceId, source: 'output.instanceId' };
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

/** The group moved on during a chunk's transaction: it aborts, and the records are read again. */
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

/** The transactional id of input partition `partition`'s producer: `<prefix>-<input topic>-<partition>`. */
export function transactionalId(config: TransactionalIdSettings, partition: number): string {
  return `${transactionalIdBase(config)}-${partition}`;
}

/** The transactional id of an instance's one producer: `<prefix>-<input topic>-instance-<instance id>`. */
export function instanceTransactionalId(config: TransactionalIdSettings, instanceId: string): string {
  return `${transactionalIdBase(config)}-instance-${instanceId}`;
}

/** What names a transactional id: the prefix (default: the group id) and the input topic. */
type TransactionalIdSettings = Pick<NodeConfig, 'input' | 'output'>;

function transactionalIdBase(config: TransactionalIdSettings): string {
  return `${config.output.transactionalIdPrefix ?? config.input.groupId}-${config.input.topic}`;
}
