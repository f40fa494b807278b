import { AsyncLocalStorage } from 'node:async_hooks';
import { ConfigError, RepositoryError, toRepositoryError } from '../../errors.js';
import { BaseRepository, SCAN_PAGE } from '../../store/base.js';
import { checkDuration, isValidDuration } from '../../store/ttl.js';
import type {
  AddResult,
  IdempotencyRecord,
  RepositoryCapabilities,
  RepositoryTransaction,
  TransactionalRepository,
  TransactionOptions,
} from '../../store/types.js';
import { processWarnings, type StoreLogger, serverClock, sharedStoreCapabilities } from '../shared.js';
import { checkLayout, closePool, type SqlPool } from './connection.js';
import type { SqlDialect } from './migration.js';
import type { SqlOptions } from './options.js';
import { detailOf, type MigrateStore, migrateStore, type PurgeOptions } from './store.js';
import type { SqlTransaction } from './transaction.js';

/** What a SQL store's `open` takes besides the config table. */
export interface SqlOpenExtras<P> {
  /** A pool to use instead of connecting from `url`: left open by `close()`. */
  readonly pool?: P;
  /** Accepted like every repository's, never used: leases and TTLs count on the server's clock. */
  readonly clock?: () => number;
  readonly logger?: StoreLogger;
}

export interface SqlSettings<P, O> {
  readonly pool: P;
  readonly ownsPool: boolean;
  readonly options: O;
  readonly address: string;
  readonly migrateStore: MigrateStore;
  readonly logger: StoreLogger;
}

/** Connects from config options (or uses the given pool), checks the table, then runs `probe` on the pool. */
export async function openSql<P extends SqlPool, O extends SqlOptions, X = undefined>(
  dialect: SqlDialect<P, O>,
  input: SqlOpenExtras<P>,
  probe?: (pool: P) => Promise<X>,
): Promise<SqlSettings<P, O> & { readonly probed: X | undefined }> {
  const { pool: given, clock: _clock, logger, ...config } = input;
  const { store } = dialect;
  const options = dialect.parseOptions(config);
  if (given !== undefined && options.url !== undefined) {
    throw new ConfigError('repository.url', 'set url or pass a pool, not both');
  }
  if (given === undefined && options.url === undefined) {
    throw new ConfigError('repository.url', `is required: a ${store}:// URL (or pass a pool in code)`);
  }
  const address = dialect.describeAddress(options.url);
  const target = migrateStore(store, options.url, options.password !== undefined);
  const { createPool, openError } = await dialect.connection();
  const pool = given ?? createPool(options);
  let probed: X | undefined;
  try {
    if (options.createTable) await dialect.apply(pool, options.table);
    const actual = await dialect.columnsOf(pool, options.table);
    checkLayout({ store, table: options.table, address }, actual, dialect.layout, target);
    probed = await probe?.(pool);
  } catch (error) {
    if (given === undefined) await closePool(pool);
    throw openError(error, address);
  }
  const settings = { pool, ownsPool: given === undefined, options, address, migrateStore: target };
  return { ...settings, logger: logger ?? processWarnings(`IDEM_${store.toUpperCase()}`), probed };
}

/** A statement's time parameter: the caller's time, or NULL (`serverClock`'s NaN) for the server's clock. */
export function timeParam(now: number): number | null {
  return Number.isNaN(now) ? null : now;
}

/** The core of the SQL stores; each dialect (postgres/, mysql/) adds its statements, transaction and error codes. */
export abstract class SqlRepository<P extends SqlPool, C, T extends SqlTransaction<C>>
  extends BaseRepository
  implements TransactionalRepository<C>
{
  readonly capabilities: RepositoryCapabilities = sharedStoreCapabilities({
    nativeBatch: true,
    // 1 MiB keeps round trips and replays cheap (a MySQL statement must fit `max_allowed_packet`), as in Redis.
    maxResultBytes: 1_048_576,
  });
  /** The open transaction of each async context: the verbs run on its connection, else on the pool. */
  protected readonly scope = new AsyncLocalStorage<T>();
  readonly pool: P;
  readonly table: string;
  /** The lock timeout of a transaction that sets none, and of a claim outside any transaction. */
  protected readonly lockTimeoutMs: number;
  protected readonly settings: SqlSettings<P, SqlOptions>;
  #purgeTimer: NodeJS.Timeout | undefined;
  #backgroundPurge: Promise<void> | undefined;

  protected constructor(settings: SqlSettings<P, SqlOptions>) {
    super({ clock: serverClock });
    const { options } = settings;
    this.settings = settings;
    this.pool = settings.pool;
    ({ table: this.table, lockTimeoutMs: this.lockTimeoutMs } = options);
    if (options.purgeIntervalMs > 0) {
      this.#purgeTimer = setInterval(() => this.#purgeInBackground(), options.purgeIntervalMs);
      this.#purgeTimer.unref();
    }
  }

  /** See {@link TransactionalRepository.transaction}: started with the work's first statement. */
  async transaction<R>(
    work: (transaction: RepositoryTransaction<C>) => Promise<R>,
    options: TransactionOptions = {},
  ): Promise<R> {
    this.assertOpen();
    if (this.scope.getStore() !== undefined) {
      throw new RepositoryError(
        `${this.storeName} transaction: already inside a transaction of this repository (use savepoint() to nest)`,
        { retryable: false },
      );
    }
    const lockTimeoutMs = options.lockTimeoutMs ?? this.lockTimeoutMs;
    // Checked by value first: the message's `where` is built only for the error.
    if (!isValidDuration(lockTimeoutMs, this.maxLockTimeoutMs)) {
      checkDuration('lockTimeoutMs', lockTimeoutMs, this.maxLockTimeoutMs, `${this.storeName} transaction`);
    }
    const transaction = await this.run('transaction', () => this.openTransaction(lockTimeoutMs));
    try {
      let result: R;
      try {
        result = await this.scope.run(transaction, work, transaction);
      } catch (error) {
        await transaction.abandon();
        throw error;
      }
      await transaction.finish(this.#fail);
      return result;
    } finally {
      await transaction.close();
    }
  }

  readonly #fail = (operation: string, error: unknown): unknown => this.storeError(operation, error);

  protected abstract readonly maxLockTimeoutMs: number;

  /** A transaction with `lockTimeoutMs` on a connection taken from the pool; nothing is sent yet. */
  protected abstract openTransaction(lockTimeoutMs: number): Promise<T>;

  /**
   * The answer for an id a claim could not decide within the lock timeout (another open transaction holds it): in
   * progress, its lease ending when this wait would have, and it expires then too unless `ttlMs` is given.
   */
  protected busy(key: string, now: number, ttlMs?: number): AddResult {
    // The server's time is unknown here (the statement failed); the worker's clock is close enough for a hint.
    const at = Number.isNaN(now) ? Date.now() : now;
    const until = at + (this.scope.getStore()?.lockTimeoutMs ?? this.lockTimeoutMs);
    const expiresAt = ttlMs === undefined ? until : at + ttlMs;
    return { added: false, existing: { id: key, state: 'in-flight', expiresAt, leaseExpiresAt: until } };
  }

  protected override async run<R>(operation: string, call: () => Promise<R>): Promise<R> {
    try {
      return await call();
    } catch (error) {
      throw toRepositoryError(`${this.storeName} ${operation}`, this.storeError(operation, error));
    }
  }

  protected storeError(operation: string, error: unknown): unknown {
    if (error instanceof ConfigError || error instanceof RepositoryError) return error;
    return (
      this.missingTable(operation, error) ??
      new RepositoryError(`${this.storeName} ${operation} failed: ${detailOf(error)}`, { cause: error })
    );
  }

  /** The error for a statement that failed because the table is gone, else undefined. */
  protected abstract missingTable(operation: string, error: unknown): RepositoryError | undefined;

  /** Deletes the rows of every namespace past `forget_at`, in bounded DELETEs until one comes back short. */
  async purge(options: PurgeOptions = {}): Promise<number> {
    this.assertOpen();
    const batchSize = options.batchSize ?? this.settings.options.purgeBatchSize;
    if (!Number.isInteger(batchSize) || batchSize < 1) {
      throw new ConfigError('batchSize', `must be a whole number above 0, got ${String(batchSize)}`, {
        label: `option batchSize of ${this.storeName} purge`,
      });
    }
    const maxBatches = options.maxBatches ?? Number.POSITIVE_INFINITY;
    return this.run('purge', async () => {
      let total = 0;
      for (let batch = 0; batch < maxBatches; batch++) {
        const deleted = (await this.purgeBatch(batchSize)) ?? 0;
        total += deleted;
        if (deleted < batchSize) break;
      }
      return total;
    });
  }

  /** Keyset paging on the primary key. */
  async scan(onPage: (records: readonly IdempotencyRecord[]) => void | Promise<void>): Promise<void> {
    this.assertOpen();
    let after: unknown;
    for (;;) {
      const page = await this.run('scan', () => this.scanPage(after, SCAN_PAGE));
      if (page.records.length === 0) return;
      await onPage(page.records);
      if (page.records.length < SCAN_PAGE) return;
      after = page.last;
    }
  }

  /** Up to `size` records with ids after `after` (undefined at first), and the last id. */
  protected abstract scanPage(
    after: unknown,
    size: number,
  ): Promise<{ readonly records: readonly IdempotencyRecord[]; readonly last: unknown }>;

  /** One DELETE of at most `batchSize` forgettable rows: how many went, or undefined when none can run. */
  protected abstract purgeBatch(batchSize: number): Promise<number | undefined>;

  #purgeInBackground(): void {
    // One at a time: a purge that outlasts the interval is not joined by another.
    if (this.#backgroundPurge !== undefined || this.closed) return;
    this.#backgroundPurge = this.purge()
      .then(
        () => undefined,
        (error: unknown) => {
          if (!this.closed)
            this.settings.logger.warn(`${this.storeName}: background purge failed: ${detailOf(error)}`);
        },
      )
      .finally(() => {
        this.#backgroundPurge = undefined;
      });
  }

  protected async doClose(): Promise<void> {
    clearInterval(this.#purgeTimer);
    this.#purgeTimer = undefined;
    await this.#backgroundPurge;
    if (this.settings.ownsPool) await closePool(this.pool);
  }
}

/** At module level: {@link handlerClient} runs for every message, and a closure per call costs more. */
function isClient(value: unknown, methods: readonly string[]): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const record = value as Record<string, unknown>;
  for (const name of methods) if (typeof record[name] !== 'function') return false;
  return true;
}

/** The driver's client in `HandlerContext.transaction`, found by its `methods` (`names`: for the error). */
export function handlerClient<C>(
  context: { readonly transaction?: unknown },
  methods: readonly string[],
  names: { readonly fn: string; readonly repository: string; readonly client: string },
): C {
  const value = context?.transaction;
  const client = isClient(value, methods)
    ? (value as C)
    : isClient((value as { client?: unknown } | undefined)?.client, methods)
      ? (value as { client: C }).client
      : undefined;
  if (client === undefined) {
    throw new ConfigError(
      'consumer.transaction',
      value === undefined
        ? `${names.fn}(context): the handler is not running inside a transaction; turn on the ` +
            `consumer's transaction option with a ${names.repository}`
        : `${names.fn}(context): context.transaction is not ${names.client} (is the repository a ${names.repository}?)`,
    );
  }
  return client;
}
