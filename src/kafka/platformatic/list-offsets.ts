import { type FetchIsolationLevelValue, MultipleErrors } from '@platformatic/kafka';
import { appendTo, retrying } from '../port/index.js';
import { findBy } from './errors.js';
import { connectionTo, type LibraryClient, send } from './internals.js';
import { retryDelayMs } from './options.js';

/*
 * ListOffsets as the port sends it. The library's `listOffsets` retries one request built with its metadata's
 * leader epoch: begun while a broker stopped, every retry gets FENCED_LEADER_EPOCH once it is back (KAFKA-9535).
 * Here the request carries no epoch (-1: unchecked) and each retry reads fresh metadata, reaching today's leader.
 */

interface ListOffsetsResponse {
  readonly topics: readonly {
    readonly name: string;
    readonly partitions: readonly { readonly partitionIndex: number; readonly offset: bigint }[];
  }[];
}

/** What to list: partitions per topic, at one timestamp (`ListOffsetTimestamps.EARLIEST`/`LATEST` or a time). */
interface OffsetsQuery {
  readonly partitions: ReadonlyMap<string, readonly number[]>;
  readonly timestamp: bigint;
  readonly isolationLevel: FetchIsolationLevelValue;
  /** Attempts after the first (the port's retry budget); the delay between them is {@link retryDelayMs}. */
  readonly retries: number;
}

/** The offsets per topic and partition, from each partition's leader; retried on fresh metadata. */
export function listOffsets(
  client: LibraryClient,
  query: OffsetsQuery,
): Promise<Map<string, Map<number, bigint>>> {
  const errors: Error[] = [];
  return retrying(
    () => listOnce(client, query, errors.length > 0),
    (error, failures) => {
      errors.push(error as Error);
      if (findBy(error, 'canRetry', false) || failures > query.retries) {
        throw failures === 1 ? error : new MultipleErrors(`listOffsets failed ${failures} times.`, errors);
      }
      client.clearMetadata();
      return retryDelayMs(failures, error);
    },
  );
}

async function listOnce(
  client: LibraryClient,
  query: OffsetsQuery,
  fresh: boolean,
): Promise<Map<string, Map<number, bigint>>> {
  const metadata = await client.metadata({ topics: [...query.partitions.keys()], forceUpdate: fresh });
  const byLeader = new Map<
    number,
    Map<string, { partitionIndex: number; currentLeaderEpoch: number; timestamp: bigint }[]>
  >();
  for (const [name, ids] of query.partitions) {
    const topic = metadata.topics.get(name);
    if (topic === undefined) throw new Error(`topic ${name} is not in the metadata`);
    for (const partitionIndex of ids) {
      const leader = topic.partitions[partitionIndex]?.leader ?? -1;
      if (leader < 0) throw new Error(`partition ${name}[${partitionIndex}] has no leader`);
      const topics = byLeader.get(leader) ?? new Map();
      byLeader.set(leader, topics);
      appendTo(topics, name, { partitionIndex, currentLeaderEpoch: -1, timestamp: query.timestamp });
    }
  }
  const responses = await Promise.all(
    [...byLeader].map(async ([leader, topics]) => {
      const broker = metadata.brokers.get(leader);
      if (broker === undefined) throw new Error(`broker ${leader} is not in the metadata`);
      const request = [...topics].map(([name, partitions]) => ({ name, partitions }));
      const connect = () => connectionTo(client, broker);
      return send<ListOffsetsResponse>(client, 'ListOffsets', connect, -1, query.isolationLevel, request);
    }),
  );
  const offsets = new Map<string, Map<number, bigint>>();
  for (const topic of responses.flatMap((r) => r.topics)) {
    const partitions = offsets.get(topic.name) ?? new Map<number, bigint>();
    offsets.set(topic.name, partitions);
    for (const p of topic.partitions) partitions.set(p.partitionIndex, p.offset);
  }
  return offsets;
}
