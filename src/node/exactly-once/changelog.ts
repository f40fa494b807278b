import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import kafkajs, { type Admin, type Kafka, type KafkaMessage } from 'kafkajs';
import { ConfigError } from '../../errors.js';

// kafkajs is CommonJS and Node's ESM loader does not see this export by name.
const { AssignerProtocol } = kafkajs;

/**
 * The node's changelog, in its minimal form: the codec of a mark, the topic, a reader of given partitions up to
 * captured end offsets, and the checkpoint files. (Issue 11 plans the shared primitive in src/kafka/changelog/;
 * this is the subset the node needs, written here because that primitive had not landed. Same record format.)
 *
 * Record: key = the id's canonical store key (UTF-8); value = version byte 1, then expiresAt as a big-endian
 * int64 of epoch ms. A null value is a tombstone (never written by the node today).
 */
const MARK_VERSION = 1;

/** Encodes a mark that expires at `expiresAt` (epoch ms). */
export function encodeMark(expiresAt: number): Buffer {
  const value = Buffer.allocUnsafe(9);
  value.writeUInt8(MARK_VERSION, 0);
  value.writeBigInt64BE(BigInt(Math.floor(expiresAt)), 1);
  return value;
}

/** The expiry (epoch ms) of an encoded mark; undefined for a tombstone or a value this version cannot read. */
export function decodeMark(value: Buffer | null): number | undefined {
  if (value === null || value.length < 9 || value.readUInt8(0) !== MARK_VERSION) return undefined;
  return Number(value.readBigInt64BE(1));
}

/**
 * Creates the changelog if missing: compacted (the latest mark per id is all a restore needs) and deleted past
 * the dedup window (older marks are worthless), with the input's partition count. An existing topic must have
 * at least that many partitions: partition p holds the marks of input partition p.
 */
export async function ensureChangelogTopic(
  admin: Admin,
  topic: string,
  partitions: number,
  windowMs: number,
): Promise<void> {
  const existing = new Set(await admin.listTopics());
  if (existing.has(topic)) {
    const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
    const count = topics[0]?.partitions.length ?? 0;
    if (count < partitions) {
      throw new ConfigError(
        'changelog.topic',
        `topic ${JSON.stringify(topic)} has ${count} partitions, fewer than the input's ${partitions}: ` +
          'changelog partition p holds the marks of input partition p',
      );
    }
    return;
  }
  await admin.createTopics({
    topics: [
      {
        topic,
        numPartitions: partitions,
        configEntries: [
          { name: 'cleanup.policy', value: 'compact,delete' },
          // A mark is written when its id is forwarded and lives `window`; a day more covers clock skew.
          { name: 'retention.ms', value: String(windowMs + 86_400_000) },
        ],
      },
    ],
    waitForLeaders: true,
  });
}

/** The committed end (last stable offset) of each partition of `topic`, as a read_committed reader sees it. */
export async function committedEnds(admin: Admin, topic: string): Promise<Map<number, number>> {
  const offsets = await admin.fetchTopicOffsets(topic);
  return new Map(offsets.map((o) => [o.partition, Number(o.offset)]));
}

/** One partition to read: `[from, to)`. */
export interface ReadRange {
  readonly partition: number;
  readonly from: number;
  readonly to: number;
}

/**
 * Reads the given partitions of the changelog from `from` up to `to` (exclusive), read_committed, handing each
 * fetched batch's records to `apply` (awaited before the next fetch). kafkajs has no manual assignment, so it is
 * a throwaway group whose assigner gives its only member exactly these partitions. `tick` is called between
 * batches (the caller heartbeats its own group there).
 */
export async function readChangelog(
  kafka: Kafka,
  topic: string,
  ranges: readonly ReadRange[],
  apply: (partition: number, messages: readonly KafkaMessage[]) => Promise<void>,
  tick: () => Promise<void> = async () => undefined,
): Promise<void> {
  const pending = new Map(ranges.filter((r) => r.to > r.from).map((r) => [r.partition, r]));
  if (pending.size === 0) return;
  const wanted = [...pending.keys()];
  const groupId = `idem-changelog-restore-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const consumer = kafka.consumer({
    groupId,
    maxWaitTimeInMs: 100,
    maxBytesPerPartition: 8 * 1024 * 1024,
    maxBytes: 32 * 1024 * 1024,
    allowAutoTopicCreation: false,
    partitionAssigners: [
      () => ({
        name: 'idem-changelog-restore',
        version: 1,
        async assign({ members }) {
          return members.map((member, i) => ({
            memberId: member.memberId,
            memberAssignment: AssignerProtocol.MemberAssignment.encode({
              version: 1,
              assignment: i === 0 ? { [topic]: wanted } : {},
              userData: Buffer.alloc(0),
            }),
          }));
        },
        protocol({ topics }) {
          return {
            name: 'idem-changelog-restore',
            metadata: AssignerProtocol.MemberMetadata.encode({
              version: 1,
              topics,
              userData: Buffer.alloc(0),
            }),
          };
        },
      }),
    ],
  });
  let finish: () => void = () => undefined;
  let fail: (error: unknown) => void = () => undefined;
  const done = new Promise<void>((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    if (!payload.restart) fail(payload.error);
  });
  try {
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        const range = pending.get(batch.partition);
        if (range === undefined) return;
        const within = batch.messages.filter((m) => Number(m.offset) < range.to);
        if (within.length > 0) await apply(batch.partition, within);
        // An empty batch (only transaction markers) reports the high watermark less one as its last offset.
        if (Number(batch.lastOffset()) + 1 >= range.to) {
          pending.delete(batch.partition);
          if (pending.size === 0) finish();
        }
        await tick();
      },
    });
    for (const range of pending.values()) {
      consumer.seek({ topic, partition: range.partition, offset: String(range.from) });
    }
    await done;
  } finally {
    await consumer.disconnect().catch(() => undefined);
    const admin = kafka.admin();
    await admin
      .connect()
      .then(() => admin.deleteGroups([groupId]))
      .catch(() => undefined)
      .finally(() => admin.disconnect());
  }
}

/**
 * Per-partition checkpoint files: the changelog offset up to which the local store holds the marks. Written
 * atomically (a temporary file renamed over the old one). A stale checkpoint only makes a restore longer; one
 * ahead of the store would lose marks, so it is written only with offsets the store has applied.
 */
export class Checkpoints {
  readonly #dir: string;
  readonly #topic: string;

  constructor(dir: string, topic: string) {
    this.#dir = dir;
    this.#topic = topic;
  }

  #file(partition: number): string {
    return join(this.#dir, `${this.#topic}-${partition}.offset`);
  }

  /** The checkpointed offset of `partition`, or undefined when there is none (or it cannot be read). */
  async read(partition: number): Promise<number | undefined> {
    try {
      const offset = Number((await readFile(this.#file(partition), 'utf8')).trim());
      return Number.isSafeInteger(offset) && offset >= 0 ? offset : undefined;
    } catch {
      return undefined;
    }
  }

  /** Records that the store holds every mark of `partition` below `offset`. */
  async write(partition: number, offset: number): Promise<void> {
    await mkdir(this.#dir, { recursive: true });
    const file = this.#file(partition);
    const temp = `${file}.${process.pid}.tmp`;
    await writeFile(temp, `${offset}\n`);
    await rename(temp, file);
  }
}
