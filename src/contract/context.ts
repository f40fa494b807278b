import { randomUUID } from 'node:crypto';
import type { IdempotencyRecord, IdempotentRepository, RepositoryCapabilities } from '../store/types.js';
import type { ContractIt, TestRunner } from './runner.js';

/**
 * Builds a repository for one test. The same `namespace` must reach the same underlying data (a directory,
 * a key prefix, a table partition), so the suite can close a persistent store and reopen it. Different namespaces
 * must never reach each other's data, even when one namespace string is a prefix of the other.
 */
export type RepositoryFactory = (context: { namespace: string }) => Promise<IdempotentRepository>;

/** What a store hands to the contract suite. */
export interface ContractOptions {
  /** Store name shown in test titles. */
  readonly name: string;
  readonly factory: RepositoryFactory;
  /** The capabilities the store declares; the suite checks the instance declares the same. */
  readonly capabilities: RepositoryCapabilities;
  /**
   * Another test runner's `describe` and `it` (or `test`), e.g. `{ describe, it }` from Vitest or Jest's globals.
   * Without it the suite registers its tests with node:test.
   */
  readonly runner?: Partial<TestRunner> & { readonly test?: TestRunner['it'] };
}

/** How each contract file receives its tests' context: a fresh one per test, disposed after it. */
export type WithContext = (fn: (ctx: ContractContext) => Promise<void>) => () => Promise<void>;

/** What each contract file's function receives: the runner's `it`, the per-test context, the store's options. */
export interface ContractSuite {
  readonly it: ContractIt;
  readonly withContext: WithContext;
  readonly options: ContractOptions;
}

/** Per-test helper: a fresh namespace, and every repository it opens closed after the test. */
export class ContractContext {
  readonly namespace = `ct-${randomUUID().slice(0, 8)}`;
  readonly #opened: IdempotentRepository[] = [];

  constructor(readonly options: ContractOptions) {}

  /** Opens (or reopens) the repository of this test's namespace, or of another (a namespace test's second). */
  async open(namespace: string = this.namespace): Promise<IdempotentRepository> {
    const repo = await this.options.factory({ namespace });
    this.#opened.push(repo);
    return repo;
  }

  /** Closes whatever is still open; errors from already-closed stores are irrelevant here. */
  async dispose(): Promise<void> {
    await Promise.allSettled(this.#opened.map((r) => r.close()));
  }
}

/** A random id per call, so tests never collide on shared servers. */
export function uniqueId(label = 'id'): string {
  return `${label}-${randomUUID()}`;
}

/** A fresh id (see {@link uniqueId}) for each label, as a tuple. */
export const uniqueIds = <L extends string[]>(...labels: L) =>
  labels.map((label) => uniqueId(label)) as { [K in keyof L]: string };

/** `head`, `fill` repeated, then `tail`: exactly `bytes` UTF-8 bytes (a tail of multi-byte characters shows a cut). */
export const padded = (bytes: number, head: string, tail = '', fill = 'x') =>
  head + fill.repeat(bytes - Buffer.byteLength(head + tail, 'utf8')) + tail;

/** The add entries of bare ids. */
export const entriesOf = (ids: readonly string[]) => ids.map((id) => ({ id }));

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Retention and lease short enough to wait out in a test, long enough for a slow first round trip. */
export const SHORT_TTL_MS = 1_200;

/**
 * Runs `run` until one run takes less than `windowMs`, at most five times, and returns that run's result. What a
 * store says *before* a short TTL or lease ends proves nothing when a loaded machine stalled the process past the
 * end between two calls: such a run is discarded, never counted as a pass. `run` must use fresh ids.
 */
export async function withinWindow<T>(windowMs: number, what: string, run: () => Promise<T>): Promise<T> {
  const runs = 5;
  for (let i = 0; i < runs; i++) {
    const started = Date.now();
    const result = await run();
    if (Date.now() - started < windowMs) return result;
  }
  throw new Error(
    `${what}: each of ${runs} runs took over ${windowMs} ms, so none shows what a store says before that ` +
      'time ends (the machine is too loaded to judge)',
  );
}
export const LONG_TTL_MS = 60_000;

/** The options of an eager claim by `owner`, with a lease of `leaseMs` and a long retention. */
export const claimBy = (owner: string, leaseMs = LONG_TTL_MS) => ({ ttlMs: LONG_TTL_MS, leaseMs, owner });

/** Every record `scan` reports, by id (a record reported twice keeps its last copy); none without `scan`. */
export async function scanned(repo: IdempotentRepository): Promise<Map<string, IdempotencyRecord>> {
  const seen = new Map<string, IdempotencyRecord>();
  await repo.scan?.((page) => {
    for (const record of page) seen.set(record.id, record);
  });
  return seen;
}

/** The skip option of a test that needs a store declared `persistent`. */
export const whenPersistent = ({ capabilities }: ContractOptions): { skip: string | false } => ({
  skip: capabilities.persistent ? false : 'the store declares persistent: false',
});

export type RepoTestBody = (repo: IdempotentRepository, ctx: ContractContext) => Promise<void>;

/** The suite's `it` for a test that starts from its namespace's repository, closed after it. */
export function repoTest({ it, withContext }: Pick<ContractSuite, 'it' | 'withContext'>) {
  return (name: string, ...args: [RepoTestBody] | [{ skip: string | false }, RepoTestBody]): void => {
    const [options, fn] = args.length === 1 ? [{ skip: false as const }, args[0]] : args;
    it(
      name,
      options,
      withContext(async (ctx) => fn(await ctx.open(), ctx)),
    );
  };
}
