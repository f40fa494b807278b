import {
  type CallbackWithPromise,
  type Connection,
  ConnectionPool,
  type Consumer,
  FetchIsolationLevels,
  type RecordsBatch,
} from '@platformatic/kafka';
import { call, libraryApi } from './internals.js';
import type { ClientContext } from './options.js';
import { CONTROL_BATCH, TRANSACTIONAL_BATCH } from './records.js';
import { stepLimitMs, timeLimited } from './time-limit.js';

/*
 * Fetch without the library's read_committed filter: `Consumer.fetch` keys aborted ranges by producer id only,
 * so two aborted transactions of one producer id in one response (every restart of an exactly-once node: the
 * next producer keeps the id) collapse into one range and the COMMITTED batches between them are dropped too
 * (lost output in the node's SIGKILL test). So the port sends Fetch itself, on connections of its own (a long
 * poll must not hold up the group's requests), and filters as Kafka's own consumer does ({@link dropAborted}).
 */

/** One partition of a Fetch answer, as read here. */
interface RawFetchPartition {
  readonly partitionIndex: number;
  readonly errorCode: number;
  readonly highWatermark: bigint;
  readonly lastStableOffset: bigint;
  readonly abortedTransactions:
    | readonly { readonly producerId: bigint; readonly firstOffset: bigint }[]
    | null;
  records?: RecordsBatch[];
}

/** A Fetch answer, as read here. */
interface RawFetchResponse {
  readonly responses: readonly { readonly topicId: string; readonly partitions: RawFetchPartition[] }[];
}

/** One partition to fetch. */
interface FetchPartitionRequest {
  readonly partition: number;
  readonly fetchOffset: bigint;
  readonly partitionMaxBytes: number;
}

type FetchApi = (
  connection: Connection,
  maxWaitMs: number,
  minBytes: number,
  maxBytes: number,
  isolationLevel: number,
  sessionId: number,
  sessionEpoch: number,
  topics: unknown[],
  forgotten: unknown[],
  rackId: string,
  callback: CallbackWithPromise<RawFetchResponse>,
) => void;

/** Sends read_committed Fetch requests for a client, on connections of its own. */
export class RawFetcher {
  readonly #pool: ConnectionPool;
  readonly #library: Consumer;
  readonly #context: ClientContext;

  constructor(context: ClientContext, library: Consumer) {
    const { clientId, ...connection } = context.base;
    this.#pool = new ConnectionPool(`${clientId}-fetch`, connection);
    this.#library = library;
    this.#context = context;
  }

  /** One Fetch to `broker` for partitions of one topic (by id); partition errors and the step limit reject. */
  fetch(
    broker: { host: string; port: number },
    topicId: string,
    partitions: readonly FetchPartitionRequest[],
    limits: { maxWaitMs: number; maxBytes: number },
  ): Promise<RawFetchResponse> {
    return timeLimited(
      `a fetch from ${broker.host}:${broker.port}`,
      this.#fetch(broker, topicId, partitions, limits),
      {
        limitMs: stepLimitMs(this.#context.base.requestTimeout),
        warn: this.#context.warn,
      },
    );
  }

  async #fetch(
    broker: { host: string; port: number },
    topicId: string,
    partitions: readonly FetchPartitionRequest[],
    limits: { maxWaitMs: number; maxBytes: number },
  ): Promise<RawFetchResponse> {
    const api = await libraryApi<FetchApi>(this.#library, 'Fetch');
    const connection = await this.#pool.get(broker);
    const topics = [
      {
        topicId,
        partitions: partitions.map((p) => ({ ...p, currentLeaderEpoch: -1, lastFetchedEpoch: -1 })),
      },
    ];
    return call<RawFetchResponse>((cb) =>
      api(
        connection,
        limits.maxWaitMs,
        1,
        limits.maxBytes,
        FetchIsolationLevels.READ_COMMITTED,
        0,
        0,
        topics,
        [],
        '',
        cb,
      ),
    );
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.#pool.close(() => resolve()));
  }
}

/**
 * The batches a read_committed reader is given, as Kafka's consumer decides: a transactional batch of a producer
 * whose aborted transaction has started (by `abortedTransactions`) is dropped until its abort marker; control
 * batches are kept (their offsets still count).
 */
export function dropAborted(
  batches: readonly RecordsBatch[],
  aborted: readonly { readonly producerId: bigint; readonly firstOffset: bigint }[] | null,
): RecordsBatch[] {
  if (!aborted || aborted.length === 0) return [...batches];
  const pending = [...aborted].sort((a, b) =>
    a.firstOffset < b.firstOffset ? -1 : a.firstOffset > b.firstOffset ? 1 : 0,
  );
  const abortedProducers = new Set<bigint>();
  const kept: RecordsBatch[] = [];
  for (const batch of batches) {
    while (
      pending.length > 0 &&
      (pending[0] as { firstOffset: bigint }).firstOffset <= batch.firstOffset + BigInt(batch.lastOffsetDelta)
    ) {
      abortedProducers.add((pending.shift() as { producerId: bigint }).producerId);
    }
    if ((batch.attributes & CONTROL_BATCH) !== 0) {
      // An abort marker (control type 0) ends that producer's aborted transaction.
      const type = batch.records[0]?.key?.readInt16BE(2);
      if (type === 0) abortedProducers.delete(batch.producerId);
      kept.push(batch);
      continue;
    }
    if ((batch.attributes & TRANSACTIONAL_BATCH) !== 0 && abortedProducers.has(batch.producerId)) continue;
    kept.push(batch);
  }
  return kept;
}
