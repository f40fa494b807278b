import { InvalidInputError } from '../../errors.js';
import type { ChangelogChange, ChangelogSink, UnreadableChange } from '../../store/changelog.js';
import type { IdempotencyRecord } from '../../store/types.js';
import type {
  KafkaClient,
  KafkaProducer,
  MessageHeaders,
  OutgoingMessage,
  RecordSender,
} from '../port/index.js';
import {
  decodeMark,
  decodePack,
  encodeMark,
  encodePack,
  isPack,
  markRecord,
  type PackedChange,
  packEntryBytes,
  packKey,
} from './codec.js';
import type { ChangelogEntry } from './reader.js';

/** Bytes of changelog records per produce request, below Kafka's default `max.message.bytes` (1 MiB). */
const REQUEST_BYTES = 512 * 1024;

/** Where a changelog's records go: a topic, one partition of it (or by key), with headers. */
export interface ChangelogTarget {
  readonly topic: string;
  /** The partition every change goes to (the node: changelog partition = input partition); default: by key. */
  readonly partition?: number;
  readonly headers?: MessageHeaders;
  /**
   * Send the changes of each request as one record ({@link encodePack}): the producer's work is per record, and a
   * chunk's marks were most of the records of an exactly-once transaction. Only for a reader that restores every
   * record (the node's changelog; not the `kafka` store, which reads its own writes back by key).
   */
  readonly pack?: boolean;
}

/**
 * Sends changes in requests under the broker's default size limit, acknowledged by every in-sync replica.
 * Resolves with the offset after the last one when all went to one partition, else undefined.
 */
export async function sendChanges(
  sender: RecordSender,
  target: ChangelogTarget,
  changes: readonly ChangelogChange[],
  onWritten?: (range: ChangelogRange) => void,
): Promise<number | undefined> {
  if (target.pack && target.partition === undefined) {
    throw new TypeError(`changelog ${target.topic}: a pack goes to one partition, and none was named`);
  }
  let next: number | undefined;
  let messages: OutgoingMessage[] = [];
  let bytes = 0;
  const flush = async () => {
    const [meta] = await sender.send({ topic: target.topic, acks: -1, messages });
    if (target.partition !== undefined) {
      const first = Number(meta?.baseOffset ?? 0);
      next = first + messages.length;
      onWritten?.({ first, next });
    }
    messages = [];
    bytes = 0;
  };
  let packed: PackedChange[] = [];
  const pack = async () => {
    const value = encodePack(packed, bytes);
    messages.push({ key: packKey(), value, partition: target.partition, headers: target.headers });
    packed = [];
    await flush();
  };
  for (const change of changes) {
    // A deletion is a null value; encodeMark leaves the record's id out.
    const value = change.record === undefined ? null : encodeMark(change.record);
    if (target.pack) {
      const size = packEntryBytes(Buffer.byteLength(change.key), value);
      if (packed.length > 0 && bytes + size > REQUEST_BYTES) await pack();
      packed.push({ key: change.key, value });
      bytes += size;
      continue;
    }
    const size = Buffer.byteLength(change.key) + (value?.length ?? 0) + 80;
    if (messages.length > 0 && bytes + size > REQUEST_BYTES) await flush();
    // Both clients take an undefined partition (by key) and headers (none) as absent.
    messages.push({ key: change.key, value, partition: target.partition, headers: target.headers });
    bytes += size;
  }
  if (packed.length > 0) await pack();
  if (messages.length > 0) await flush();
  return next;
}

/** The offsets one request wrote to the changelog partition: `first` up to `next` (exclusive). */
export interface ChangelogRange {
  readonly first: number;
  readonly next: number;
}

/** Options of a {@link KafkaChangelogSink}. */
export interface KafkaChangelogSinkOptions extends ChangelogTarget {
  /** For `clear()` (DeleteRecords). */
  readonly client: KafkaClient;
  /** A connected idempotent producer, owned by the caller. */
  readonly producer: KafkaProducer;
}

/** A changelog topic written outside transactions: an append resolves once all in-sync replicas acked. */
export class KafkaChangelogSink implements ChangelogSink {
  #written: ChangelogRange[] = [];

  constructor(private readonly options: KafkaChangelogSinkOptions) {}

  async append(changes: readonly ChangelogChange[]): Promise<void> {
    await sendChanges(this.options.producer, this.options, changes, (range) => this.#written.push(range));
  }

  /** Ranges written since the last call (one not starting at the store's offset: another writer appended). */
  takeWritten(): ChangelogRange[] {
    const written = this.#written;
    this.#written = [];
    return written;
  }

  /** Deletes the records of the sink's partition (or of every partition) up to the end (DeleteRecords). */
  async clear(): Promise<void> {
    const { client, topic, partition } = this.options;
    const admin = client.admin();
    await admin.connect();
    try {
      await admin.deleteRecords(topic, partition === undefined ? undefined : [partition]);
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }
}

/**
 * The changes that changelog records stand for, in order: a null value is a deletion, any other a mark. A record
 * that cannot be read (empty, an unknown format, a time that is not finite) is skipped and reported, never restored
 * as a mark that never expires, and never blocks the rest of the partition.
 */
export function decodeChanges(
  topic: string,
  partition: number,
  records: readonly ChangelogEntry[],
  onUnreadable: (unreadable: UnreadableChange) => void,
): ChangelogChange[] {
  const changes: ChangelogChange[] = [];
  // An InvalidInputError skips the record (or the pack's change) it was raised for; any other error is raised.
  const skip = (error: unknown, offset: number) => {
    if (!(error instanceof InvalidInputError)) throw error;
    onUnreadable({ topic, partition, offset, reason: error.message });
  };
  const add = (key: string, value: Buffer | null, offset: number) => {
    try {
      const record = value === null ? undefined : markRecord(key, decodeMark(value));
      if (record) checkTimes(record);
      changes.push({ key, record });
    } catch (error) {
      skip(error, offset);
    }
  };
  for (const { key, value, offset } of records) {
    try {
      if (value === null || !isPack(value)) add(key, value, offset);
      else for (const change of decodePack(value)) add(change.key, change.value, offset);
    } catch (error) {
      skip(error, offset);
    }
  }
  return changes;
}

function checkTimes(record: IdempotencyRecord): void {
  for (const field of ['expiresAt', 'leaseExpiresAt'] as const) {
    const value = record[field];
    if (value !== undefined && !Number.isFinite(value)) {
      throw new InvalidInputError('changelog value', `${field} is ${value}, not a time`);
    }
  }
  if (record.state !== 'confirmed' && record.state !== 'in-flight') {
    throw new InvalidInputError('changelog value', `unknown record state ${JSON.stringify(record.state)}`);
  }
}
