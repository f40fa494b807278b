import type { ChangelogOffsets, ChangelogSource, ChangelogSourceRead } from '../../store/changelog.js';
import type { ChangelogEntry, ChangelogReader } from './reader.js';
import { decodeChanges } from './sink.js';

/** Options of a {@link KafkaChangelogSource}. */
export interface KafkaChangelogSourceOptions {
  /** The reader (owned by the caller, who closes it). */
  readonly reader: ChangelogReader;
  readonly topic: string;
  /** Which records to apply (default: all; the `kafka` repository leaves out its own writes). */
  readonly accept?: (entry: ChangelogEntry) => boolean;
}

/** A changelog topic as a logged store's {@link ChangelogSource}, decoded by {@link decodeChanges}. */
export class KafkaChangelogSource implements ChangelogSource {
  readonly topic: string;

  constructor(private readonly source: KafkaChangelogSourceOptions) {
    this.topic = source.topic;
  }

  partitions(): Promise<number[]> {
    return this.source.reader.partitions(this.topic);
  }

  endOffsets(partitions: readonly number[]): Promise<ChangelogOffsets> {
    return this.source.reader.endOffsets(this.topic, partitions);
  }

  read(options: ChangelogSourceRead): Promise<ChangelogOffsets> {
    const { topic, accept } = this.source;
    const { onCaughtUp } = options;
    return this.source.reader.read({
      ...options,
      topic,
      onCaughtUp: onCaughtUp && (() => onCaughtUp()),
      onBatch: (partition, records, nextOffset) => {
        const kept = accept ? records.filter(accept) : records;
        const changes = decodeChanges(topic, partition, kept, options.onUnreadable);
        return options.onBatch(partition, changes, nextOffset);
      },
    });
  }
}
