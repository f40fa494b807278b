import { closeSync, fstatSync, fsyncSync, openSync, type Stats, statSync } from 'node:fs';
import { isatty } from 'node:tty';
import type { DuplicateRecord, HandlerContext, ProcessResult } from '../consumer/types.js';
import { ConfigError, OutputError } from '../errors.js';
import { type LineBatch, STDIN } from './lines.js';
import { writeAllSync } from './output.js';

/** What `first` says when the first copy was not read by this run: it was marked by an earlier one. */
export const EARLIER_RUN = 'earlier run';

/** Lines per input file a packed place can tell apart (2^32): line numbers are far below it. */
const LINES_PER_SOURCE = 2 ** 32;

/**
 * `idem dedup --duplicates FILE`: one NDJSON line per dropped line (docs/cli.md, "What was dropped"). Every id
 * this run wrote is kept with its place packed into one number (input index × 2^32 + line): the option's memory
 * cost. A batch's records are appended once it is written and marked; the file is fsynced at the end.
 */
export class DuplicateLog {
  readonly #fd: number;
  readonly #path: string;
  /** Only a regular file is fsynced: a device (/dev/null, a terminal) refuses fsync with EINVAL. */
  readonly #durable: boolean;
  /** Id → packed place of its first copy, for the ids this run wrote. */
  readonly #firstAt = new Map<string, number>();
  readonly #sources: string[] = [];
  readonly #sourceIndex = new Map<string, number>();
  /** The current batch's audit records, by line index in the batch. */
  readonly #pending = new Map<number, DuplicateRecord>();

  private constructor(fd: number, path: string, durable: boolean) {
    this.#fd = fd;
    this.#durable = durable;
    this.#path = path;
  }

  /**
   * Opens (creates, or appends to) the file. A path that cannot be opened is a usage error, and so is one of
   * `inputs` (the run would read its own records back) or stdout: compared by device and inode, so
   * `/dev/stdout` or a link is caught too.
   */
  static open(path: string, inputs: readonly string[] = []): DuplicateLog {
    if (path === '-') throw refused('must name a file: stdout carries the kept lines');
    let fd: number;
    try {
      fd = openSync(path, 'a');
    } catch (error) {
      const { code, message } = error as NodeJS.ErrnoException;
      throw refused(`cannot open ${JSON.stringify(path)} for writing (${code ?? message})`);
    }
    let log: Stats;
    try {
      log = fstatSync(fd);
      // A device that is not a terminal (/dev/null) keeps nothing that could mix or be read back.
      if (!log.isCharacterDevice() || isatty(fd)) refuseSharedFile(path, log, inputs);
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    return new DuplicateLog(fd, path, log.isFile());
  }

  /** The consumer's `onDuplicate`: keeps the record until the batch is done. */
  readonly hook = (entry: number, _context: HandlerContext, duplicate: DuplicateRecord): void => {
    this.#pending.set(entry, duplicate);
  };

  /**
   * After a batch was written and marked: remembers where its lines were written, and appends one record per
   * dropped line (results are in input order, so an in-batch duplicate's first copy is remembered first).
   */
  afterBatch(batch: LineBatch, entries: readonly number[], results: readonly ProcessResult[]): void {
    let out = '';
    for (let j = 0; j < results.length; j++) {
      const result = results[j] as ProcessResult;
      const entry = entries[j] as number;
      const id = result.id;
      if (id === undefined) continue;
      if (result.outcome === 'processed') {
        if (!this.#firstAt.has(id)) this.#firstAt.set(id, this.#pack(batch, entry));
        continue;
      }
      if (result.outcome !== 'duplicate') continue;
      const packed = this.#firstAt.get(id);
      const record: Record<string, string> = { id, at: batch.location(entry) };
      if (packed !== undefined) record.first = this.#unpack(packed);
      else {
        record.first = EARLIER_RUN;
        const firstSeen = this.#pending.get(entry)?.firstSeen;
        if (firstSeen !== undefined) record.firstSeen = new Date(firstSeen).toISOString();
      }
      out += `${JSON.stringify(record)}\n`;
    }
    this.#pending.clear();
    if (out.length > 0) this.#write(Buffer.from(out));
  }

  /** Flushes the file to disk and closes it. */
  close(): void {
    try {
      if (this.#durable) fsyncSync(this.#fd);
    } catch (error) {
      throw this.#fail(error);
    } finally {
      closeSync(this.#fd);
    }
  }

  #pack(batch: LineBatch, entry: number): number {
    const source = batch.source(entry);
    let index = this.#sourceIndex.get(source);
    if (index === undefined) {
      index = this.#sources.push(source) - 1;
      this.#sourceIndex.set(source, index);
    }
    return index * LINES_PER_SOURCE + batch.line(entry);
  }

  #unpack(packed: number): string {
    const index = Math.floor(packed / LINES_PER_SOURCE);
    return `${this.#sources[index]}:${packed - index * LINES_PER_SOURCE}`;
  }

  #write(data: Buffer): void {
    try {
      writeAllSync(this.#fd, data, (at) => new Error(`wrote ${at} of ${data.length} bytes, then nothing`));
    } catch (error) {
      throw this.#fail(error);
    }
  }

  #fail(error: unknown): OutputError {
    return new OutputError(
      `writing the duplicates to ${this.#path} failed (${(error as Error).message}); ` +
        'a re-run records the dropped lines of this batch again',
      { cause: error },
    );
  }
}

/** A usage error naming `--duplicates`. */
const refused = (message: string) => new ConfigError('duplicates', message, { label: '--duplicates' });

/** Throws when the opened log is stdout or one of the inputs (stdin for `-`). */
function refuseSharedFile(path: string, log: Stats, inputs: readonly string[]): void {
  const same = (other: Stats | undefined) =>
    other !== undefined && other.dev === log.dev && other.ino === log.ino;
  if (same(statOf(() => fstatSync(1)))) {
    throw refused(
      `${JSON.stringify(path)} is the run's stdout, which carries the kept lines: name another file`,
    );
  }
  for (const input of inputs) {
    const stats = statOf(() => (input === STDIN ? fstatSync(0) : statSync(input)));
    if (!same(stats)) continue;
    const what = input === STDIN ? 'stdin, which this run reads' : `the input ${JSON.stringify(input)}`;
    throw refused(
      `${JSON.stringify(path)} is ${what}: the run would read its own records back; name another file`,
    );
  }
}

/** A file's stats, or undefined when there is none to compare (a closed descriptor, a vanished file). */
function statOf(read: () => Stats): Stats | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}
