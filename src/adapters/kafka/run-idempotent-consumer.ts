import type { TraceSource } from '../../consumer/telemetry/api.js';
import type { HandlerContext, ProcessResult } from '../../consumer/types.js';
import { errorMessage, InProgressError, InvalidIdError, InvalidInputError } from '../../errors.js';
import {
  type DeadLetter,
  type DlqReason,
  deadLetter,
  type IdVerdict,
  messageIdReader,
  recordFate,
  sendDeadLetters,
} from '../../kafka/index.js';
import {
  type ConsumedBatch,
  type ConsumedMessage,
  type GroupConsumer,
  type KafkaClient,
  type KafkaProducer,
  openKafkaClient,
} from '../../kafka/port/index.js';
import type { KafkajsConsumer } from './kafkajs-shapes.js';
import {
  kafkaAdapterDefaults,
  type ResolvedKafkaAdapterOptions,
  type RunIdempotentConsumerOptions,
  resolveKafkaAdapterOptions,
} from './options.js';
import { BlockedRecord, type BlockKind, backoffMs } from './retry.js';
import type { KafkaAdapterStats, KafkaRecord } from './types.js';

/** A running adapter. */
export interface IdempotentKafkaConsumer {
  /** The kafkajs consumer (cast it to kafkajs's `Consumer`); on another client reading it throws a TypeError. */
  readonly consumer: KafkajsConsumer;
  /** Running counts; the IdempotentConsumer's own `stats` count outcomes. */
  readonly stats: Readonly<KafkaAdapterStats>;
  /**
   * Stops consuming: the batch in flight runs no further handler, settles its claims and commits what was
   * finished; pending retries are dropped (read again from the committed offset). Safe to call twice.
   */
  stop(): Promise<void>;
}

/**
 * Runs a Kafka consumer (kafkajs, or the client `client` names) whose records go through an IdempotentConsumer:
 * one `processBatch` per sub-batch of a partition, offsets committed only for finished records (handled,
 * duplicate, forwarded without id, or dead-lettered and acknowledged), failing records retried in order with
 * backoff while their partition is paused, then dead-lettered. Resolves once the consumer runs. See docs/kafka.md.
 */
export async function runIdempotentConsumer<R>(
  options: RunIdempotentConsumerOptions<R>,
): Promise<IdempotentKafkaConsumer> {
  const resolved = resolveKafkaAdapterOptions(options);
  const parts = await adapterParts(resolved);
  const runner = new Runner(resolved, parts);
  try {
    await runner.start();
  } catch (error) {
    await runner.stop().catch(() => undefined);
    throw error;
  }
  return runner;
}

type AdapterParts = Awaited<ReturnType<typeof adapterParts>>;

/**
 * The port's parts the adapter runs on: the caller's kafkajs objects, wrapped (kafkajs loaded only then;
 * `never`: the wrappers take kafkajs's own types), or a client of its own, `ownClient`, opened from settings.
 */
async function adapterParts(resolved: ResolvedKafkaAdapterOptions<unknown>) {
  const { kafka, connection, consumer, dlqProducer } = resolved;
  const kafkajs =
    (kafka ?? consumer ?? dlqProducer) === undefined
      ? undefined
      : await import('../../kafka/kafkajs/index.js');
  const ownClient =
    connection &&
    (await openKafkaClient(
      { ...connection, client: resolved.client },
      { retries: kafkaAdapterDefaults.clientRetries },
      { configKey: 'client', feature: 'runIdempotentConsumer(...)' },
    ));
  const client = kafka && kafkajs ? kafkajs.fromKafkajs(kafka as never) : ownClient;
  const groupId = resolved.groupId ?? '';
  const group: GroupConsumer =
    consumer && kafkajs
      ? new kafkajs.KafkajsConsumer(consumer as never, groupId)
      : (client as KafkaClient).consumer({
          groupId,
          maxWaitMs: kafkaAdapterDefaults.maxWaitTimeInMs,
          // As kafkajs's consumers do by default.
          allowAutoTopicCreation: true,
          extra: resolved.consumerConfig as Record<string, unknown>,
        });
  const producer: KafkaProducer | undefined = !resolved.dlq
    ? undefined
    : dlqProducer && kafkajs
      ? new kafkajs.KafkajsProducer(dlqProducer as never)
      : client?.producer({ allowAutoTopicCreation: true });
  return { consumer: group, producer, ownClient };
}

/** Thrown by the wrapped handler for records it declines to run; never reaches the caller. */
const DEFERRED = Object.freeze({ deferred: 'the record was not handled; it is read again later' });

/** How one sub-batch ended. */
interface Segment {
  /** Records from the start of the sub-batch that are finished, letters included. */
  done: number;
  letters: DeadLetter[];
  /** Why the partition stopped at the record after the finished prefix, when it did. */
  block?: { kind: BlockKind; error: unknown };
  /** A failed heartbeat (rebalance): raised to kafkajs after the commit. */
  interrupt?: unknown;
  /** Offsets with a final outcome (handled, duplicate, no id), so a re-read after a cut skips them. */
  finished: string[];
}

class Runner implements IdempotentKafkaConsumer {
  readonly stats: KafkaAdapterStats = { batches: 0, records: 0, retries: 0, deadLettered: 0, commits: 0 };
  readonly #options: ResolvedKafkaAdapterOptions<unknown>;
  readonly #group: GroupConsumer;
  readonly #producer: KafkaProducer | undefined;
  readonly #ownClient: KafkaClient | undefined;
  readonly #readId: (message: ConsumedMessage) => IdVerdict;
  // Keyed by `topic:partition`.
  readonly #blocked = new Map<string, BlockedRecord>();
  /** Offsets past the committed one that are already finished (a record before them was not). */
  readonly #ahead = new Map<string, Set<string>>();
  readonly #timers = new Map<string, { timer: NodeJS.Timeout; topic: string; partition: number }>();
  readonly #unsubscribe: (() => void)[] = [];
  #stopping = false;
  #stopped: Promise<void> | undefined;

  constructor(options: ResolvedKafkaAdapterOptions<unknown>, parts: AdapterParts) {
    this.#options = options;
    ({ consumer: this.#group, producer: this.#producer, ownClient: this.#ownClient } = parts);
    this.#readId = messageIdReader(options.id);
  }

  get consumer(): KafkajsConsumer {
    // A kafkajs consumer behind the port, the caller's own or one made from `kafka`.
    const { native } = this.#group as { native?: KafkajsConsumer };
    if (native === undefined) {
      throw new TypeError(
        `the Kafka adapter runs on client ${JSON.stringify(this.#options.client)}: it has no kafkajs consumer`,
      );
    }
    return native;
  }

  async start(): Promise<void> {
    const consumer = this.#group;
    await consumer.connect();
    await this.#producer?.connect();
    await consumer.subscribe(this.#options.topics, this.#options.fromBeginning);
    this.#unsubscribe.push(
      consumer.onGroupJoin(({ assignment }) => this.#onAssignment(assignment)),
      // A crashed consumer restarts with fresh group state (no pauses): the timers have nothing left to resume.
      consumer.onCrash(() => this.#clearTimers()),
    );
    await consumer.run({
      partitionsConsumedConcurrently: this.#options.partitionsConsumedConcurrently,
      eachBatch: (batch) => this.#onBatch(batch),
    });
  }

  stop(): Promise<void> {
    this.#stopped ??= (async () => {
      this.#stopping = true;
      this.#clearTimers();
      for (const off of this.#unsubscribe.splice(0)) off();
      const owned = this.#options.consumer === undefined;
      try {
        await (owned ? this.#group.disconnect() : this.#group.stop());
      } finally {
        try {
          if (this.#producer && !this.#options.dlqProducer) await this.#producer.disconnect();
        } finally {
          await this.#ownClient?.close();
        }
      }
    })();
    return this.#stopped;
  }

  /** One fetched batch of one partition, taken in sub-batches of `batchSize`, in offset order. */
  async #onBatch(payload: ConsumedBatch): Promise<void> {
    const { topic, partition, messages } = payload;
    const stream = `${topic}:${partition}`;
    const offsetAt = (i: number) => (messages[i] as ConsumedMessage).offset;
    const verdicts = messages.map(this.#readId);
    let next = 0;
    while (next < messages.length) {
      if (this.#halted(payload)) return;
      let blocked = this.#blocked.get(stream);
      if (blocked && BigInt(blocked.offset) < BigInt(offsetAt(next))) {
        // The committed offset moved past it (another member finished it): forget it.
        this.#blocked.delete(stream);
        blocked = undefined;
      }
      // A record that failed before is retried alone, so nothing after it runs until it is finished.
      const end =
        blocked?.offset === offsetAt(next)
          ? next + 1
          : Math.min(messages.length, next + this.#options.batchSize);
      const segment = await this.#runSegment(payload, stream, next, end, verdicts);

      let finished = segment.done;
      let block = segment.block;
      if (block?.kind === 'handler' && !segment.interrupt && this.#producer) {
        const index = next + finished;
        const attempts = this.#blockAt(stream, offsetAt(index)).handlerFailures + 1;
        if (attempts >= this.#options.retry.maxAttempts) {
          const message = messages[index] as ConsumedMessage;
          segment.letters.push(
            deadLetter(topic, partition, message, 'handler-failed', block.error, attempts),
          );
          finished++;
          block = undefined;
        }
      }
      if (segment.letters.length > 0) {
        const dlq = this.#options.dlq?.topic as string;
        await sendDeadLetters(this.#producer as KafkaProducer, dlq, segment.letters).then(
          () => {
            for (const { message, reason, attempts } of segment.letters) {
              this.stats.deadLettered++;
              this.#options.onDeadLetter?.({ topic, partition, offset: message.offset, reason, attempts });
            }
          },
          (error: unknown) => {
            // Nothing from the first unwritten letter on may be committed: stop there and retry it later.
            finished = messages.indexOf((segment.letters[0] as DeadLetter).message as ConsumedMessage) - next;
            block = { kind: 'infra', error };
          },
        );
      }
      // The next offset to read; finished records past it (handled, maybe) are skipped on a re-read.
      const cut =
        next + finished < messages.length
          ? BigInt(offsetAt(next + finished))
          : BigInt(payload.lastOffset()) + 1n;
      const ahead = segment.finished.filter((offset) => BigInt(offset) > cut);
      if (ahead.length > 0) this.#ahead.set(stream, new Set([...(this.#ahead.get(stream) ?? []), ...ahead]));
      if (finished > 0) {
        next += finished;
        this.stats.records += finished;
        await this.#commit(payload, next);
        this.#forgetBefore(stream, cut);
      }
      if (segment.interrupt) throw segment.interrupt;
      if (block) {
        this.#retryLater(topic, partition, offsetAt(next), block);
        return;
      }
      if (finished === 0) return; // stopped before the first record
      await payload.heartbeat();
    }
  }

  /** Runs records [from, to) through the IdempotentConsumer and reports the finished prefix. */
  async #runSegment(
    payload: ConsumedBatch,
    stream: string,
    from: number,
    to: number,
    verdicts: readonly IdVerdict[],
  ): Promise<Segment> {
    const { topic, partition, messages } = payload;
    const segment: Segment = { done: 0, letters: [], finished: [] };
    const ahead = this.#ahead.get(stream);
    const records: KafkaRecord[] = [];
    const positions: number[] = []; // index in `messages` of each record in `records`
    for (let i = from; i < to; i++) {
      const verdict = verdicts[i] as IdVerdict;
      const message = messages[i] as ConsumedMessage;
      if (!verdict.ok || ahead?.has(message.offset)) continue;
      records.push({ topic, partition, message, id: verdict.id, timestamp: Number(message.timestamp) });
      positions.push(i);
    }

    const invoked = new WeakSet<KafkaRecord>();
    /** Records the handler declined (DEFERRED): read again later, so the telemetry reports no outcome. */
    const declined = new WeakSet<KafkaRecord>();
    let halted = false;
    const handler = async (record: KafkaRecord, context: HandlerContext): Promise<unknown> => {
      try {
        if (halted || this.#halted(payload)) throw DEFERRED;
        await payload.heartbeat();
      } catch (error) {
        if (error !== DEFERRED) segment.interrupt = error;
        halted = true;
        declined.add(record);
        throw DEFERRED;
      }
      invoked.add(record);
      try {
        return await this.#options.handler(record, context);
      } catch (error) {
        // Later records of the partition must wait for this one: decline them, so their claims are released.
        halted = true;
        throw error;
      }
    };

    let results: ProcessResult[] = [];
    if (records.length > 0) {
      try {
        const { groupId } = this.#options;
        // The consumer's telemetry (if it has any): a consumer span per record, continuing its `traceparent`.
        const trace: TraceSource = {
          kind: 'consumer',
          attributes: {
            'messaging.system': 'kafka',
            'messaging.operation.type': 'process',
            'messaging.operation.name': 'process',
            'messaging.destination.name': topic,
            'messaging.destination.partition.id': String(partition),
            // Unknown for a consumer given by the caller.
            ...(groupId === undefined ? undefined : { 'messaging.consumer.group.name': groupId }),
          },
          attributesOf: (j) => ({
            'messaging.kafka.offset': Number((records[j] as KafkaRecord).message.offset),
          }),
          headersOf: (j) => (records[j] as KafkaRecord).message.headers,
          declined: (j) => declined.has(records[j] as KafkaRecord),
        };
        ({ results } = await this.#options.idempotent.processBatch(records, handler, {
          stream,
          // The duplicate audit record (`onDuplicate`'s third argument) names each copy by topic/partition/offset.
          placeOf: (j) => ({ topic, partition, offset: (records[j] as KafkaRecord).message.offset }),
          trace,
        }));
        this.stats.batches++;
      } catch (error) {
        // The store (or a hook) failed for the whole sub-batch: not any record's fault.
        segment.block = { kind: 'infra', error };
        return segment;
      }
    }
    records.forEach((record, j) => {
      const result = results[j];
      if (result && recordFate(result, true).fate === 'ack') segment.finished.push(record.message.offset);
    });

    let k = 0;
    for (let i = from; i < to; i++) {
      const verdict = verdicts[i] as IdVerdict;
      if (!verdict.ok) {
        const error =
          verdict.reason === 'invalid-json'
            ? new InvalidInputError(
                `${topic}[${partition}]@${(messages[i] as ConsumedMessage).offset}`,
                verdict.detail,
              )
            : new InvalidIdError(verdict.detail);
        if (!this.#refuse(segment, payload, i, verdict.reason, error)) return segment;
        continue;
      }
      if (positions[k] !== i) {
        segment.done++; // finished before, ahead of an unfinished record
        continue;
      }
      const result = results[k] as ProcessResult;
      const record = records[k] as KafkaRecord;
      k++;
      if (result.error === DEFERRED) return segment;
      const fate = recordFate(result, invoked.has(record));
      if (fate.fate === 'ack') segment.done++;
      else if (fate.fate === 'dead-letter') {
        if (!this.#refuse(segment, payload, i, fate.reason, fate.error)) return segment;
      } else {
        const { id, existing } = result;
        const error =
          fate.kind === 'handler' ? fate.error : new InProgressError(id ?? '', existing?.leaseExpiresAt);
        segment.block = { kind: fate.kind, error };
        return segment;
      }
    }
    return segment;
  }

  /** A record that can never be handled: a dead letter, or without a DLQ, a block. False when it blocks. */
  #refuse(
    segment: Segment,
    payload: ConsumedBatch,
    index: number,
    reason: DlqReason,
    error: unknown,
  ): boolean {
    if (!this.#producer) {
      segment.block = { kind: 'poison', error };
      return false;
    }
    const { topic, partition, messages } = payload;
    segment.letters.push(deadLetter(topic, partition, messages[index] as ConsumedMessage, reason, error));
    segment.done++;
    return true;
  }

  #halted(payload: ConsumedBatch): boolean {
    return this.#stopping || !payload.isRunning() || payload.isStale();
  }

  /** Commits everything before `messages[upTo]` (all of the batch, control records included, at the end). */
  async #commit(payload: ConsumedBatch, upTo: number): Promise<void> {
    const last = payload.messages[upTo - 1] as ConsumedMessage;
    const next = (
      BigInt(upTo === payload.messages.length ? payload.lastOffset() : last.offset) + 1n
    ).toString();
    await payload.commit(next);
    // Resolved after the commit, so a failed commit leaves the records to be fetched (and skipped) again.
    payload.resolveOffset(last.offset);
    this.stats.commits++;
  }

  /** Drops what is remembered about offsets before `cut`, which are committed. */
  #forgetBefore(stream: string, cut: bigint): void {
    const blocked = this.#blocked.get(stream);
    if (blocked && BigInt(blocked.offset) < cut) this.#blocked.delete(stream);
    const ahead = this.#ahead.get(stream);
    if (!ahead) return;
    for (const offset of ahead) if (BigInt(offset) < cut) ahead.delete(offset);
    if (ahead.size === 0) this.#ahead.delete(stream);
  }

  #blockAt(stream: string, offset: string): BlockedRecord {
    let record = this.#blocked.get(stream);
    if (!record || record.offset !== offset) {
      record = new BlockedRecord(offset);
      this.#blocked.set(stream, record);
    }
    return record;
  }

  /** Pauses the partition and resumes it after the backoff; the fetch then starts again at the blocked record. */
  #retryLater(
    topic: string,
    partition: number,
    offset: string,
    block: { kind: BlockKind; error: unknown },
  ): void {
    const stream = `${topic}:${partition}`;
    const record = this.#blockAt(stream, offset);
    const retryInMs = backoffMs(record.count(block.kind), this.#options.retry);
    this.stats.retries++;
    const info = { topic, partition, offset, kind: block.kind, attempts: record.handlerFailures, retryInMs };
    if (this.#options.onError) this.#options.onError(block.error, info);
    else {
      const reason = errorMessage(block.error);
      this.#group.warn(`idempotent consumer: record not finished, retrying: ${reason}`, info);
    }
    const tp = [{ topic, partitions: [partition] }];
    this.#group.pause(tp);
    clearTimeout(this.#timers.get(stream)?.timer);
    const timer = setTimeout(() => {
      this.#timers.delete(stream);
      // When the group is gone (stopped, or restarting after a crash) there is nothing to resume: a no-op.
      if (!this.#stopping) this.#group.resume(tp);
    }, retryInMs);
    this.#timers.set(stream, { timer, topic, partition });
  }

  /** After a rebalance: forget partitions this member lost, and un-pause them in case they come back. */
  #onAssignment(assignment: Readonly<Record<string, readonly number[]>>): void {
    const kept = new Set(
      Object.entries(assignment).flatMap(([topic, partitions]) => partitions.map((p) => `${topic}:${p}`)),
    );
    for (const stream of this.#blocked.keys()) if (!kept.has(stream)) this.#blocked.delete(stream);
    for (const stream of this.#ahead.keys()) if (!kept.has(stream)) this.#ahead.delete(stream);
    for (const [stream, { timer, topic, partition }] of this.#timers) {
      if (kept.has(stream)) continue;
      clearTimeout(timer);
      this.#timers.delete(stream);
      this.#group.resume([{ topic, partitions: [partition] }]);
    }
  }

  #clearTimers(): void {
    for (const { timer } of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
  }
}
