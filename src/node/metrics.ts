import { createServer, type Server } from 'node:http';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

const CATCH_UP_LABELS = ['topic', 'partition'];

/** Each metric's help text, by name. */
const HELP = {
  idem_node_records_in_total: 'Records read from the input topic',
  idem_node_records_out_total: 'Records written to the output topic',
  idem_node_duplicates_dropped_total: 'Records dropped as duplicates',
  idem_node_records_without_id_total: 'Records without a dedup id',
  idem_node_dlq_records_total: 'Records sent to the DLQ, by reason',
  idem_node_duplicates_raced_total:
    "Records forwarded although another worker marked their id between this node's lookup and its mark",
  idem_node_output_retries_total: 'Output requests retried after an error that may pass',
  idem_node_store_failures_total:
    'Store calls that failed and were passed over (storeFailure = process), by operation',
  idem_node_batch_duration_seconds:
    'Wall time to handle one fetched partition batch, from hand-over to offsets committed',
  idem_node_store_operation_duration_seconds: 'Latency of dedup store calls, by operation',
  idem_node_consumer_lag: 'Records between the last handled offset and the partition high watermark',
  idem_node_restore_ids_total:
    'Marks read back from the changelog into the local store (restores after an assignment)',
  idem_node_changelog_unreadable_total:
    'Changelog records skipped by a restore because they could not be read (each logged with its offset)',
  idem_node_restore_lag:
    'Changelog records still to restore before the partition processes its first record (0 when ready)',
  idem_node_restore_duration_seconds:
    'One restore of newly assigned partitions: producer init, changelog read and apply',
  idem_node_transactions_total: 'Exactly-once chunk transactions, by result (committed, aborted, fenced)',
  idem_node_catch_up_active: 'Whether the partition is catching up (1) or not (0)',
  idem_node_catch_up_lag:
    'Records behind the high watermark of the last fetch, for a partition that caught up since start',
  idem_node_catch_up_rate: 'Records per second handled by the current (or last) catch-up of the partition',
  idem_node_catch_up_eta_seconds:
    'Estimated seconds until the partition lag reaches zero (net of the head growth); +Inf if not shrinking',
  idem_node_catch_ups_total:
    'Catch-ups started (a partition found at least catchUp.lagThreshold records behind)',
  idem_node_catch_up_records_total: 'Records handled while catching up',
} as const;

type MetricName = keyof typeof HELP;

/** The node's Prometheus metrics, on their own registry so several nodes in one process never collide. */
export class NodeMetrics {
  readonly registry = new Registry();
  readonly recordsIn = this.counter('idem_node_records_in_total');
  readonly recordsOut = this.counter('idem_node_records_out_total');
  readonly duplicates = this.counter('idem_node_duplicates_dropped_total');
  readonly noId = this.counter('idem_node_records_without_id_total');
  readonly deadLetters = this.counter('idem_node_dlq_records_total', ['reason']);
  readonly raced = this.counter('idem_node_duplicates_raced_total');
  readonly outputRetries = this.counter('idem_node_output_retries_total');
  readonly storeFailures = this.counter('idem_node_store_failures_total', ['operation']);
  readonly batchSeconds = this.histogram(
    'idem_node_batch_duration_seconds',
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  );
  readonly storeSeconds = this.histogram(
    'idem_node_store_operation_duration_seconds',
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    ['operation'],
  );
  readonly lag = this.gauge('idem_node_consumer_lag', ['topic', 'partition']);
  readonly restoredIds = this.counter('idem_node_restore_ids_total');
  readonly changelogUnreadable = this.counter('idem_node_changelog_unreadable_total');
  readonly restoreLag = this.gauge('idem_node_restore_lag', ['partition']);
  readonly restoreSeconds = this.histogram(
    'idem_node_restore_duration_seconds',
    [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
  );
  readonly transactions = this.counter('idem_node_transactions_total', ['result']);
  readonly catchUpActive = this.gauge('idem_node_catch_up_active', CATCH_UP_LABELS);
  readonly catchUpLag = this.gauge('idem_node_catch_up_lag', CATCH_UP_LABELS);
  readonly catchUpRate = this.gauge('idem_node_catch_up_rate', CATCH_UP_LABELS);
  readonly catchUpEta = this.gauge('idem_node_catch_up_eta_seconds', CATCH_UP_LABELS);
  readonly catchUps = this.counter('idem_node_catch_ups_total', CATCH_UP_LABELS);
  readonly catchUpRecords = this.counter('idem_node_catch_up_records_total', CATCH_UP_LABELS);
  #server: Server | undefined;

  private counter<L extends string = never>(name: MetricName, labelNames: L[] = []): Counter<L> {
    return new Counter({ name, help: HELP[name], labelNames, registers: [this.registry] });
  }

  private gauge<L extends string>(name: MetricName, labelNames: L[]): Gauge<L> {
    return new Gauge({ name, help: HELP[name], labelNames, registers: [this.registry] });
  }

  private histogram<L extends string = never>(
    name: MetricName,
    buckets: number[],
    labelNames: L[] = [],
  ): Histogram<L> {
    return new Histogram({ name, help: HELP[name], buckets, labelNames, registers: [this.registry] });
  }

  /** Serves `/metrics`; resolves with the bound port (0 picks a free one). */
  async listen(port: number, host: string): Promise<number> {
    const server = createServer((req, res) => {
      if (req.url !== '/metrics') {
        res.writeHead(404).end();
        return;
      }
      this.registry.metrics().then(
        (body) => res.writeHead(200, { 'content-type': this.registry.contentType }).end(body),
        (error: unknown) => res.writeHead(500).end(String(error)),
      );
    });
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    const address = server.address();
    return typeof address === 'object' && address ? address.port : port;
  }

  async close(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
