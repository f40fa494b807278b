/**
 * Fast catch-up (KAFKA-7132's intent): a partition far behind its high watermark is handled in larger chunks until
 * it is back within one ordinary chunk of the head. See docs/node.md, "Fast catch-up".
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import type { NodeMetrics } from './metrics.js';
import { round } from './perf-log.js';

export const catchUpDefaults = {
  enabled: true,
  /** Records behind the high watermark that start a catch-up (about 10 s of a steady node on the test box). */
  lagThreshold: 200_000,
  /** Chunk size while catching up: records per store call and per output request, and the most a crash repeats. */
  batchSize: 10_000,
} as const;

/** `[catchUp]`: when a partition catches up and how large its chunks are meanwhile. */
export const catchUpSchema = z
  .object({
    enabled: z.boolean().default(catchUpDefaults.enabled),
    lagThreshold: z.number().int().min(1).default(catchUpDefaults.lagThreshold),
    batchSize: z.number().int().min(1).default(catchUpDefaults.batchSize),
  })
  .strict()
  .prefault({});

export type CatchUpConfig = z.output<typeof catchUpSchema>;

/** Progress of one partition's catch-up, as in the perf log's `catchUp` field. */
export interface CatchUpProgress {
  readonly topic: string;
  readonly partition: number;
  /** Records behind the high watermark of the last fetch, and handled per second since the catch-up started. */
  readonly lag: number;
  readonly rate: number;
  /** Seconds until the lag reaches zero at the current rate, net of the head's growth; null: not shrinking. */
  readonly etaSeconds: number | null;
  readonly handled: number;
  /** False once the partition is back within one ordinary chunk of the head. */
  readonly active: boolean;
}

interface Run {
  readonly topic: string;
  readonly partition: number;
  readonly label: { topic: string; partition: string };
  readonly startedAt: number;
  readonly startWatermark: number;
  handled: number;
  lag: number;
  watermark: number;
  at: number;
  active: boolean;
}

/** Decides whether a partition is catching up and how large its next chunk is, and keeps the catch-up metrics. */
export class CatchUp {
  readonly #config: CatchUpConfig;
  readonly #ordinary: number;
  readonly #logger: Logger;
  readonly #runs = new Map<string, Run>();
  /** Partitions that caught up since start: their lag gauge follows them down to zero afterwards too. */
  readonly #tracked = new Set<string>();
  /** Runs that ended since the last perf line: reported once more, then forgotten. */
  readonly #ended: Run[] = [];
  readonly #metrics: NodeMetrics;

  constructor(config: CatchUpConfig, ordinaryBatchSize: number, metrics: NodeMetrics, logger: Logger) {
    this.#config = config;
    this.#ordinary = ordinaryBatchSize;
    this.#metrics = metrics;
    this.#logger = logger;
  }

  /** The size of a partition's next chunk, starting at `offset`; starts a catch-up past `catchUp.lagThreshold`. */
  chunkSize(topic: string, partition: number, offset: number, highWatermark: number): number {
    if (!this.#config.enabled) return this.#ordinary;
    const key = runKey(topic, partition);
    let run = this.#runs.get(key);
    const lag = Math.max(0, highWatermark - offset);
    if (run === undefined && lag >= this.#config.lagThreshold) {
      const now = performance.now();
      run = {
        topic,
        partition,
        label: { topic, partition: String(partition) },
        startedAt: now,
        startWatermark: highWatermark,
        handled: 0,
        lag,
        watermark: highWatermark,
        at: now,
        active: true,
      };
      this.#runs.set(key, run);
      this.#tracked.add(key);
      this.#metrics.catchUps.inc(run.label);
      this.#metrics.catchUpActive.set(run.label, 1);
      this.#metrics.catchUpLag.set(run.label, lag);
      this.#logger.info(
        { topic, partition, lag, chunk: this.#config.batchSize },
        `partition ${partition} is ${lag} records behind: catching up in chunks of ${this.#config.batchSize}`,
      );
    }
    return run === undefined ? this.#ordinary : this.#config.batchSize;
  }

  /** After a chunk: `count` records handled, the partition's next offset and the fetch's high watermark. */
  handled(topic: string, partition: number, count: number, nextOffset: number, highWatermark: number): void {
    const key = runKey(topic, partition);
    const run = this.#runs.get(key);
    const lag = Math.max(0, highWatermark - nextOffset);
    if (run === undefined) {
      if (this.#tracked.has(key)) this.#metrics.catchUpLag.set({ topic, partition: String(partition) }, lag);
      return;
    }
    run.handled += count;
    run.lag = lag;
    run.watermark = highWatermark;
    run.at = performance.now();
    this.#metrics.catchUpRecords.inc(run.label, count);
    const progress = this.#progress(run);
    this.#metrics.catchUpLag.set(run.label, run.lag);
    this.#metrics.catchUpRate.set(run.label, progress.rate);
    this.#metrics.catchUpEta.set(run.label, progress.etaSeconds ?? Number.POSITIVE_INFINITY);
    // Back within one ordinary chunk of the head: ordinary chunks again, so the crash bound is back too.
    if (run.lag < this.#ordinary) this.#end(run, 'caught up');
  }

  /** The partitions were reassigned: a catch-up in progress ends (its partition may be another member's now). */
  reassigned(): void {
    for (const run of this.#runs.values()) this.#end(run, 'ended by a rebalance');
  }

  /** Progress of the partitions catching up now or since the last call, for the perf log; resets the latter. */
  flush(): CatchUpProgress[] {
    const list = [...this.#ended, ...this.#runs.values()].map((run) => this.#progress(run));
    this.#ended.length = 0;
    return list;
  }

  /** Logs one perf line of catch-up progress when a partition is catching up or finished one since the last. */
  logProgress(): void {
    const progress = this.flush();
    if (progress.length > 0) this.#logger.info({ catchUp: progress }, formatCatchUp(progress));
  }

  #end(run: Run, why: string): void {
    const key = runKey(run.topic, run.partition);
    if (this.#runs.get(key) !== run) return;
    this.#runs.delete(key);
    run.active = false;
    this.#ended.push(run);
    this.#metrics.catchUpActive.set(run.label, 0);
    this.#metrics.catchUpEta.set(run.label, run.lag === 0 ? 0 : Number.POSITIVE_INFINITY);
    const { topic, partition, handled, lag, rate } = this.#progress(run);
    const seconds = (run.at - run.startedAt) / 1000;
    this.#logger.info(
      { topic, partition, handled, seconds: round(seconds, 2), rate, lag },
      `partition ${partition} catch-up ${why}: ${handled} records in ${seconds.toFixed(1)} s (${rate}/s), lag ${lag}`,
    );
  }

  #progress(run: Run): CatchUpProgress {
    const seconds = (run.at - run.startedAt) / 1000;
    const rate = seconds > 0 ? run.handled / seconds : 0;
    const headRate = seconds > 0 ? (run.watermark - run.startWatermark) / seconds : 0;
    const net = rate - headRate;
    const etaSeconds = run.lag === 0 ? 0 : net > 0 ? round(run.lag / net, 1) : null;
    const { topic, partition, lag, handled, active } = run;
    return { topic, partition, lag, rate: Math.round(rate), etaSeconds, handled, active };
  }
}

/** `catch-up: partition 0 lag 523000 at 31000/s, ~17 s to zero; partition 1 caught up (…)`. */
export function formatCatchUp(progress: readonly CatchUpProgress[]): string {
  const parts = progress.map((p) =>
    p.active
      ? `partition ${p.partition} lag ${p.lag} at ${p.rate}/s, ${p.etaSeconds === null ? 'not shrinking' : `~${p.etaSeconds} s to zero`}`
      : `partition ${p.partition} done (${p.handled} records at ${p.rate}/s, lag ${p.lag})`,
  );
  return `catch-up: ${parts.join('; ')}`;
}

function runKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`;
}
