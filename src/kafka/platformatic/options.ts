import type { BaseOptions, SASLOptions } from '@platformatic/kafka';
import {
  CONCURRENT_TRANSACTIONS_RETRY_MS,
  isConcurrentTransactions,
  type KafkaClientBehaviour,
  type KafkaClientSettings,
  retryBackoffMs,
} from '../port/index.js';
import type { LibraryClient } from './internals.js';

// How the port's settings become @platformatic/kafka options (the library rejects unknown or wrong ones itself).

/** The wait before retry `attempt` (1 first): {@link retryBackoffMs}; CONCURRENT_TRANSACTIONS starts lower. */
export function retryDelayMs(attempt: number, error?: unknown): number {
  const usual = retryBackoffMs(Math.max(0, attempt - 1));
  if (error === undefined || !isConcurrentTransactions(error, 'apiId')) return usual;
  return Math.min(usual, CONCURRENT_TRANSACTIONS_RETRY_MS * 2 ** Math.max(0, attempt - 1));
}

/** The SASL mechanism names the library expects (upper case). */
const MECHANISMS = {
  plain: 'PLAIN',
  'scram-sha-256': 'SCRAM-SHA-256',
  'scram-sha-512': 'SCRAM-SHA-512',
} as const satisfies Record<string, SASLOptions['mechanism']>;

/** The options every library client of one port client shares. */
export function baseOptions(settings: KafkaClientSettings, behaviour: KafkaClientBehaviour): BaseOptions {
  const options: BaseOptions = {
    clientId: settings.clientId,
    bootstrapBrokers: [...settings.brokers],
    connectTimeout: settings.connectionTimeout,
    requestTimeout: settings.requestTimeout,
    // The library's own request-level timeout (also the produce request's broker-side timeout).
    timeout: settings.requestTimeout,
    retries: behaviour.retries,
    retryDelay: (_client, _operation, attempt, _retries, error) => retryDelayMs(attempt, error),
    autocreateTopics: false,
  };
  if (settings.ssl !== false) {
    options.tls = settings.ssl === true ? {} : { ...settings.ssl };
    // SNI: the configured name, else the broker's host name.
    options.tlsServerName = options.tls.servername ?? true;
  }
  if (settings.sasl) {
    const { mechanism, username, password } = settings.sasl;
    options.sasl = { mechanism: MECHANISMS[mechanism], username, password };
  }
  return options;
}

export type Warn = (message: string, fields: Record<string, unknown>) => void;

export interface ClientContext {
  readonly base: BaseOptions;
  /** The port's `retries`, for the requests the port sends itself. */
  readonly retries: number;
  /** Reports a library client's failed broker connections through the port's log (see index.ts); returns it. */
  readonly watch: <T extends LibraryClient>(client: T) => T;
  /** `work` bounded by the step limit ({@link timeLimited}), warning through `warn` (default: the port's log). */
  readonly limited: <T>(step: string, work: Promise<T>, warn?: Warn) => Promise<T>;
}
