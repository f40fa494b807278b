import type { IdempotentConsumer } from '../consumer/idempotent-consumer.js';
import type { BatchItem } from '../consumer/types.js';
import type { DuplicateLog } from './duplicates.js';
import type { LineBatch } from './lines.js';
import type { InvalidPolicy } from './options.js';
import type { Output } from './output.js';
import type { DedupCounts } from './progress.js';

/** A line's index in the current batch: a number, not an object per line (see {@link BatchIds}). */
export type DedupEntry = number;

/** The consumer's id selector for {@link DedupEntry} messages: the id of that line of the current batch. */
export class BatchIds {
  /** The ids of the batch being processed (undefined: passed through without id). */
  ids: readonly (string | undefined)[] = [];
  readonly id = (entry: DedupEntry): string | undefined => this.ids[entry];
}

/** Everything one run needs; the CLI wires it to files, stdout and the configured store. */
export interface DedupJob {
  readonly batches: AsyncIterable<LineBatch>;
  /** A lazy-mode consumer whose id selector is `ids.id`, skipping duplicates, forwarding id-less entries. */
  readonly consumer: IdempotentConsumer<DedupEntry>;
  /** The consumer's id selector: pointed at each batch's ids before the batch is processed. */
  readonly ids: BatchIds;
  readonly invalid: InvalidPolicy;
  readonly output: Output;
  /** `--duplicates`: the audit log of dropped lines (the consumer's `onDuplicate` is its `hook`). */
  readonly duplicates?: DuplicateLog;
  readonly counts: DedupCounts;
  /** Called for each invalid line that is passed or skipped, with its `file:line`. */
  readonly onInvalid: (location: string, reason: string, passed: boolean) => void;
  /** Called after each batch is written and marked. */
  readonly onBatch: (counts: DedupCounts) => void;
  /** Checked between batches: a signal asks the run to stop after the current batch. */
  readonly stopRequested: () => boolean;
}

/** How a run ended. */
export type DedupEnd =
  | { readonly kind: 'done' | 'stopped' | 'output-closed' }
  | { readonly kind: 'invalid'; readonly location: string; readonly reason: string };

/**
 * Deduplicates batches of lines. Per batch: ids already marked are dropped, the survivors are written and the
 * write awaited, and only then are their ids marked. So a marked id's line is always in the output, and a
 * kill between write and mark repeats at most that one batch.
 */
export async function dedupLines(job: DedupJob): Promise<DedupEnd> {
  const { counts } = job;
  // One output buffer for all batches: a write is handed to the OS before the next batch is joined into it.
  let scratch = Buffer.allocUnsafeSlow(0);
  const handler = {
    batch: (items: readonly BatchItem<DedupEntry>[]) => {
      const batch = current as LineBatch;
      const indices = new Array<number>(items.length);
      for (let k = 0; k < items.length; k++) indices[k] = (items[k] as BatchItem<DedupEntry>).message;
      const size = batch.joinedSize(indices);
      if (scratch.length < size) scratch = Buffer.allocUnsafeSlow(Math.max(size, 2 * scratch.length));
      return job.output.write(batch.joinInto(indices, scratch.subarray(0, size)));
    },
  };
  let current: LineBatch | undefined;
  for await (const batch of job.batches) {
    current = batch;
    const { ids } = batch;
    const entries: DedupEntry[] = [];
    let stop: { location: string; reason: string } | undefined;
    let read = batch.length;
    for (let i = 0; i < ids.length; i++) {
      if (ids[i] !== undefined) {
        entries.push(i);
        continue;
      }
      const reason = batch.reason(i) ?? 'no id';
      counts.invalid++;
      if (job.invalid === 'error') {
        // The lines before the bad one are still written and marked, so a re-run after the fix resumes.
        stop = { location: batch.location(i), reason };
        read = i + 1;
        break;
      }
      // An over-long line's bytes were never kept, so even `pass` can only skip it.
      const passed = job.invalid === 'pass' && batch.kept(i);
      job.onInvalid(batch.location(i), reason, passed);
      if (passed) entries.push(i);
    }
    counts.read += read;
    counts.bytes += read === batch.length ? batch.bytes : batch.joinedSize([...Array(read).keys()]);

    if (entries.length > 0) {
      // A passed-through line's id is undefined, so the consumer forwards it without deduplicating.
      job.ids.ids = ids;
      const { results } = await job.consumer.processBatch(entries, handler);
      if (job.output.error) {
        if (job.output.closedByReader) return { kind: 'output-closed' };
        throw job.output.error;
      }
      for (const result of results) {
        if (result.outcome === 'duplicate') counts.duplicates++;
        else if (result.outcome === 'failed') throw result.error;
        else counts.written++;
      }
      job.duplicates?.afterBatch(batch, entries, results);
    }
    job.onBatch(counts);
    if (stop) return { kind: 'invalid', ...stop };
    if (job.stopRequested()) return { kind: 'stopped' };
  }
  return { kind: 'done' };
}
