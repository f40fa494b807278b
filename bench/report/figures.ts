/**
 * Machine-readable figures of one benchmark run, so `npm run bench:report` never scrapes printed text. A bench
 * collects its figures and its ratios against the baselines it measured in the same run, and writes them as JSON
 * when given `--json <file>`.
 */
import { writeFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';

/** One measured figure, e.g. a rate or a time per message. */
export interface Figure {
  readonly label: string;
  readonly value: number;
  readonly unit: string;
}

/** A same-run ratio against a baseline, with the target for it. */
export interface Ratio {
  /** Stable name, e.g. `redis.eager-vs-redis-benchmark`. */
  readonly id: string;
  readonly label: string;
  readonly value: number;
  /** The target, or undefined when the ratio is only reported. */
  readonly target?: number;
  /** `min`: the target is met when value ≥ target (higher is better); `max`: when value ≤ target. */
  readonly kind: 'min' | 'max';
  /** What the ratio is measured against, for the report's table. */
  readonly baseline: string;
}

/** A table the report prints as it is, e.g. one row per size of a growth curve. */
export interface FigureTable {
  readonly title: string;
  readonly columns: readonly string[];
  readonly rows: readonly (readonly string[])[];
}

/** A measured curve (y against x, one line per series), drawn in the report's chart on log-log axes. */
export interface Curve {
  /** Stable name, e.g. `rocksdb-growth.us-per-id`. */
  readonly id: string;
  readonly title: string;
  /** Axis labels, with their units. */
  readonly x: string;
  readonly y: string;
  readonly series: readonly {
    readonly name: string;
    readonly points: readonly (readonly [number, number])[];
  }[];
  /** A ceiling to draw as a line (a target on y), if any. */
  readonly limit?: number;
}

/** What a bench writes with `--json`. */
export interface BenchFigures {
  readonly bench: string;
  /** The command that reproduces the run. */
  readonly command: string;
  readonly figures: Figure[];
  readonly ratios: Ratio[];
  /** 1, 5 and 15 minute load averages at the end of the run. */
  readonly loadavg: number[];
  readonly cores: number;
  readonly notes: string[];
  /** Optional: benches without them write none (and older JSON files have none). */
  readonly tables?: FigureTable[];
  readonly curves?: Curve[];
}

/** Whether a ratio meets its target; undefined when it has none. */
/** The median of same-run ratios taken over rounds: one disturbed round does not move it. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export function meetsTarget(ratio: Ratio): boolean | undefined {
  if (ratio.target === undefined) return undefined;
  return ratio.kind === 'min' ? ratio.value >= ratio.target : ratio.value <= ratio.target;
}

/** Collects one bench's figures and writes them to the `--json` file, if any. */
export class FigureSink {
  readonly #data: BenchFigures;

  constructor(bench: string, command: string) {
    this.#data = {
      bench,
      command,
      figures: [],
      ratios: [],
      loadavg: [],
      cores: 0,
      notes: [],
      tables: [],
      curves: [],
    };
  }

  figure(label: string, value: number, unit: string): void {
    this.#data.figures.push({ label, value, unit });
  }

  ratio(ratio: Ratio): Ratio {
    this.#data.ratios.push(ratio);
    return ratio;
  }

  table(table: FigureTable): void {
    this.#data.tables?.push(table);
  }

  curve(curve: Curve): void {
    this.#data.curves?.push(curve);
  }

  note(text: string): void {
    this.#data.notes.push(text);
  }

  /** Writes the JSON file when `path` is set (the bench's `--json` value); stamps load average and cores. */
  write(path: string | undefined): void {
    if (path === undefined) return;
    const data: BenchFigures = { ...this.#data, loadavg: loadavg(), cores: availableParallelism() };
    writeFileSync(path, `${JSON.stringify(data, null, 2)}\n`);
  }
}
