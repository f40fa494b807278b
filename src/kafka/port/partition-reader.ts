// The changelog reader's reads, with no consumer group (a join per restore costs seconds). Batches come as
// Kafka writes them: the reader drops aborted transactions, as Kafka's consumer does.

export interface BatchRecord {
  readonly offset: number;
  /** The key as UTF-8 text (changelog keys are canonical ids); null for a keyless record. */
  readonly key: string | null;
  readonly value: Buffer | null;
  readonly headers: Record<string, Buffer>;
}

/** One record batch as written by a producer (or a transaction marker batch). */
export interface RecordBatch {
  readonly baseOffset: number;
  readonly lastOffsetDelta: number;
  readonly producerId: number;
  readonly inTransaction: boolean;
  /** A control batch: its records are commit/abort markers. */
  readonly isControl: boolean;
  readonly records: BatchRecord[];
}

/** One partition of a fetch response: its batches, and the transactions aborted in the fetched range. */
export interface FetchedPartition {
  readonly partition: number;
  readonly errorCode: number;
  readonly abortedTransactions: readonly { readonly producerId: number; readonly firstOffset: number }[];
  readonly batches: readonly RecordBatch[];
}

/** One read_committed fetch of some partitions of one topic. */
export interface PartitionFetch {
  readonly topic: string;
  readonly partitions: readonly { readonly partition: number; readonly offset: number }[];
  /** How long the broker may hold the fetch while nothing new is there, in ms. */
  readonly maxWaitMs: number;
  /** Most bytes the whole fetch returns (per leader). */
  readonly maxBytes: number;
  readonly maxBytesPerPartition: number;
}

/**
 * Reads from the leaders, read_committed, safe for concurrent calls; an offset out of range rejects as
 * {@link KafkaErrorClassifier.isOffsetOutOfRange} says, a moved leader with a retriable error.
 */
export interface PartitionReader {
  /** The topic's partition ids, sorted, from fresh metadata. */
  partitions(topic: string): Promise<number[]>;
  /** Per partition: the log start (`earliest`), or the last stable offset (`latest`). */
  listOffsets(
    topic: string,
    partitions: readonly number[],
    which: 'earliest' | 'latest',
  ): Promise<Map<number, number>>;
  /** One fetch per partition leader, in parallel; resolves with every partition's decoded batches. */
  fetch(request: PartitionFetch): Promise<FetchedPartition[]>;
  /** Reloads the cluster metadata (after a failed fetch: a leader may have moved). */
  refreshMetadata(): Promise<void>;
  close(): Promise<void>;
}

export function appendTo<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** {@link PartitionReader.fetch}: `fetchFrom` each leader's partitions in parallel; a leaderless one rejects. */
export async function fetchByLeader(
  request: PartitionFetch,
  leaderOf: (partition: number) => number | undefined,
  fetchFrom: (leader: number, partitions: PartitionFetch['partitions']) => Promise<FetchedPartition[]>,
): Promise<FetchedPartition[]> {
  const leaders = new Map<number, PartitionFetch['partitions'][number][]>();
  for (const p of request.partitions) {
    const leader = leaderOf(p.partition) ?? -1;
    if (leader < 0) throw new Error(`partition ${request.topic}[${p.partition}] has no leader`);
    appendTo(leaders, leader, p);
  }
  return (await Promise.all([...leaders].map(([leader, ps]) => fetchFrom(leader, ps)))).flat();
}

/**
 * Kafka's read_committed filter over one partition's batches, fed in offset order: a transactional batch of a
 * producer whose aborted transaction (a fetch's `abortedTransactions`) has begun is dropped until that producer's
 * abort marker. Control batches are kept (their offsets still count).
 */
export class AbortedTransactions<N extends number | bigint> {
  readonly #pending: readonly { readonly producerId: N; readonly firstOffset: N }[];
  #next = 0;
  readonly #producers = new Set<N>();

  constructor(aborted: readonly { readonly producerId: N; readonly firstOffset: N }[] | null | undefined) {
    const order = (a: { firstOffset: N }, b: { firstOffset: N }) =>
      a.firstOffset < b.firstOffset ? -1 : a.firstOffset > b.firstOffset ? 1 : 0;
    this.#pending = aborted ? [...aborted].sort(order) : [];
  }

  /** Whether the next batch, ending at `lastOffset`, is kept; `abortMarker`: a control batch ending an abort. */
  keeps(
    lastOffset: N,
    producerId: N,
    transactional: boolean,
    control: boolean,
    abortMarker: boolean,
  ): boolean {
    for (let t = this.#pending[this.#next]; t !== undefined && t.firstOffset <= lastOffset; ) {
      this.#producers.add(t.producerId);
      t = this.#pending[++this.#next];
    }
    if (control) {
      if (abortMarker) this.#producers.delete(producerId);
      return true;
    }
    return !transactional || !this.#producers.has(producerId);
  }
}
