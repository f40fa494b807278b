import type { IdempotentConsumer } from '../consumer/idempotent-consumer.js';
import type { BatchItem } from '../consumer/types.js';
import type { LineBatch } from './lines.js';
import type { InvalidPolicy } from './options.js';
import type { Output } from './output.js';
import type { DedupCounts } from './progress.js';

/** A line on its way through the consumer: its position in the batch and its id (undefined: passed through). */
export interface DedupEntry {
  readonly index: number;
  readonly id: string | undefined;
}

/** Everything one run needs; the CLI wires it to files, stdout and the configured store. */
export interface DedupJob {
  readonly batches: AsyncIterable<LineBatch>;
  /** A lazy-mode consumer whose id selector is `entry.id`, skipping duplicates, forwarding id-less entries. */
  readonly consumer: IdempotentConsumer<DedupEntry>;
  readonly invalid: InvalidPolicy;
  readonly output: Output;
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
  | { readonly kind: 'done' }
  | { readonly kind: 'stopped' }
  | { readonly kind: 'output-closed' }
  | { readonly kind: 'invalid'; readonly location: string; readonly reason: string };

/**
 * Deduplicates batches of lines. Per batch: one `containsMany` drops ids already marked, the survivors are
 * written to the output and the write is awaited, and only then are their ids marked (`addMany`). So a marked
 * id's line is always in the output, and a kill between write and mark repeats at most that one batch.
 */
export async function dedupLines(job: DedupJob): Promise<DedupEnd> {
  const { counts } = job;
  for await (const batch of job.batches) {
    const entries: DedupEntry[] = [];
    let stop: { location: string; reason: string } | undefined;
    for (let i = 0; i < batch.length; i++) {
      counts.read++;
      counts.bytes += batch.size(i);
      const id = batch.ids[i];
      if (id !== undefined) {
        entries.push({ index: i, id });
        continue;
      }
      const reason = batch.reasons[i] ?? 'no id';
      counts.invalid++;
      if (job.invalid === 'error') {
        // The lines before the bad one are still written and marked, so a re-run after the fix resumes.
        stop = { location: batch.location(i), reason };
        break;
      }
      // An over-long line's bytes were never kept, so even `pass` can only skip it.
      const passed = job.invalid === 'pass' && batch.kept(i);
      job.onInvalid(batch.location(i), reason, passed);
      if (passed) entries.push({ index: i, id: undefined });
    }

    if (entries.length > 0) {
      const handler = {
        batch: (items: readonly BatchItem<DedupEntry>[]) => job.output.write(joinLines(batch, items)),
      };
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
    }
    job.onBatch(counts);
    if (stop) return { kind: 'invalid', ...stop };
    if (job.stopRequested()) return { kind: 'stopped' };
  }
  return { kind: 'done' };
}

/** The lines' exact bytes, each followed by a newline, in one buffer (one write per batch). */
function joinLines(batch: LineBatch, items: readonly BatchItem<DedupEntry>[]): Buffer {
  let size = 0;
  for (const item of items) size += batch.size(item.message.index);
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const item of items) at = batch.copyLine(item.message.index, out, at);
  return out;
}
