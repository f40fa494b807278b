import cliProgress from 'cli-progress';

/** Running counts of one `idem dedup` run. */
export interface DedupCounts {
  read: number;
  /** Lines written to stdout (first-seen lines plus invalid lines passed through). */
  written: number;
  /** Lines dropped because their id was seen before (in an earlier run, file or line). */
  duplicates: number;
  /** Malformed lines and lines without a usable id, whatever `--invalid` did with them. */
  invalid: number;
  /** Input bytes consumed, for the progress bar. */
  bytes: number;
}

export function emptyCounts(): DedupCounts {
  return { read: 0, written: 0, duplicates: 0, invalid: 0, bytes: 0 };
}

/** Between two plain progress lines when stderr is not a terminal. */
const PLAIN_INTERVAL_MS = 5_000;

/**
 * Progress on stderr: a bar when stderr is a terminal, otherwise a plain line every few seconds, so logs
 * stay readable. Messages go through {@link log} so they do not tear the bar.
 */
export class Progress {
  readonly #started = performance.now();
  #multibar: cliProgress.MultiBar | undefined;
  #bar: cliProgress.SingleBar | undefined;
  #lastPlain = performance.now();

  /** `show`: progress at all (file inputs without `--no-progress`); the summary is printed regardless. */
  constructor(
    private readonly show: boolean,
    private readonly totalBytes: number,
  ) {
    if (show && process.stderr.isTTY) {
      this.#multibar = new cliProgress.MultiBar(
        {
          stream: process.stderr,
          format:
            '{bar} {percentage}% | {lines} lines | {rate} lines/s | {duplicates} dup | {invalid} invalid | ETA {eta_formatted}',
          hideCursor: true,
          clearOnComplete: true,
          fps: 5,
          etaBuffer: 100,
        },
        cliProgress.Presets.shades_classic,
      );
      this.#bar = this.#multibar.create(Math.max(totalBytes, 1), 0, payload(emptyCounts(), 0));
    }
  }

  get elapsedMs(): number {
    return performance.now() - this.#started;
  }

  update(counts: DedupCounts): void {
    if (!this.show) return;
    if (this.#bar) {
      this.#bar.update(counts.bytes, payload(counts, this.elapsedMs));
      return;
    }
    const now = performance.now();
    if (now - this.#lastPlain < PLAIN_INTERVAL_MS) return;
    this.#lastPlain = now;
    const percent = this.totalBytes > 0 ? (100 * counts.bytes) / this.totalBytes : 0;
    this.log(
      `idem dedup: ${fmt(counts.read)} lines (${percent.toFixed(1)}%), ${fmt(rate(counts.read, this.elapsedMs))} lines/s, ` +
        `${fmt(counts.duplicates)} duplicates, ${fmt(counts.invalid)} invalid`,
    );
  }

  /** Writes one line of text to stderr, above the bar if there is one. */
  log(text: string): void {
    if (this.#multibar) this.#multibar.log(`${text}\n`);
    else process.stderr.write(`${text}\n`);
  }

  stop(): void {
    this.#multibar?.stop();
    this.#multibar = undefined;
    this.#bar = undefined;
  }

  summary(counts: DedupCounts, note?: string): string {
    const ms = this.elapsedMs;
    return (
      `idem dedup: read ${fmt(counts.read)} lines, wrote ${fmt(counts.written)}, ` +
      `duplicates ${fmt(counts.duplicates)}, invalid ${fmt(counts.invalid)}, ` +
      `${(ms / 1000).toFixed(1)}s (${fmt(rate(counts.read, ms))} lines/s)${note ? `; ${note}` : ''}`
    );
  }
}

function payload(counts: DedupCounts, elapsedMs: number): Record<string, string> {
  return {
    lines: fmt(counts.read),
    rate: fmt(rate(counts.read, elapsedMs)),
    duplicates: fmt(counts.duplicates),
    invalid: fmt(counts.invalid),
  };
}

function rate(lines: number, ms: number): number {
  return ms > 0 ? Math.round((lines * 1000) / ms) : 0;
}

function fmt(n: number): string {
  return n.toLocaleString('en-US');
}
