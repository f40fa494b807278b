/**
 * One contender of a cross-process race (see race.ts). Store-agnostic:
 *
 *   node --import tsx test/helpers/race-worker.ts <store> '<json options>'
 *
 * builds the repository through `src/repositories/<store>/index.ts`'s `repositoryModule`, then talks to the
 * parent over IPC: receives `init` (ids and settings), answers `ready` once connected, waits for `go` (the
 * barrier that makes all workers start together), claims every id in shuffled batches, and reports `done` with
 * the ids it won. Any failure is reported as `error`, and the process exits non-zero.
 */
import type { RepositoryModule } from '../../src/repositories/module.js';
import type { AddOptions, IdempotentRepository } from '../../src/store/types.js';
import { prng, seedOf, shuffle } from './random.js';

/** Parent → worker: what to claim and how. */
export interface RaceInit {
  readonly type: 'init';
  readonly ids: readonly string[];
  /** Owner token of this worker, also used as its shuffle seed. */
  readonly owner: string;
  readonly batchSize: number;
  /** `eager`: in-flight claims with a lease (then confirmed when `confirm`); `lazy`: confirmed marks. */
  readonly mode: 'eager' | 'lazy';
  readonly ttlMs: number;
  readonly leaseMs: number;
  /** Confirm the won claims afterwards (eager mode only). */
  readonly confirm: boolean;
}

/** Worker → parent messages. */
export type RaceReport =
  | { readonly type: 'ready' }
  | {
      readonly type: 'done';
      readonly won: string[];
      /** Claims this worker won but could not confirm (should be none). */
      readonly unconfirmed: string[];
      readonly batches: number;
    }
  | { readonly type: 'error'; readonly message: string };

/** Deterministic shuffle, so a failing interleaving can be replayed from the owner seed. */
function shuffleBySeed<T>(items: readonly T[], seedText: string): T[] {
  return shuffle(items, prng(seedOf(seedText)));
}

const send = (message: RaceReport) =>
  new Promise<void>((resolve, reject) => {
    process.send?.(message, undefined, {}, (error) => (error ? reject(error) : resolve()));
  });

function nextMessage<T extends { type: string }>(type: T['type']): Promise<T> {
  return new Promise((resolve) => {
    const onMessage = (message: T) => {
      if (message?.type !== type) return;
      process.off('message', onMessage);
      resolve(message);
    };
    process.on('message', onMessage);
  });
}

async function race(repo: IdempotentRepository, init: RaceInit): Promise<RaceReport> {
  const options: AddOptions =
    init.mode === 'eager'
      ? { ttlMs: init.ttlMs, leaseMs: init.leaseMs, owner: init.owner }
      : { ttlMs: init.ttlMs };
  const order = shuffleBySeed(init.ids, init.owner);
  const won: string[] = [];
  const unconfirmed: string[] = [];
  let batches = 0;
  for (let i = 0; i < order.length; i += init.batchSize) {
    const batch = order.slice(i, i + init.batchSize);
    const results = await repo.addMany(
      batch.map((id) => ({ id })),
      options,
    );
    batches++;
    const mine = batch.filter((_, k) => results[k]?.added === true);
    won.push(...mine);
    if (init.confirm && init.mode === 'eager' && mine.length > 0) {
      const ok = await repo.confirmMany(
        mine.map((id) => ({ id, owner: init.owner })),
        { ttlMs: init.ttlMs },
      );
      unconfirmed.push(...mine.filter((_, k) => ok[k] !== true));
    }
  }
  return { type: 'done', won, unconfirmed, batches };
}

async function main(): Promise<void> {
  const [store, json] = process.argv.slice(2);
  if (!store || !process.send) throw new TypeError('usage: race-worker.ts <store> <json options> (with IPC)');
  const initMessage = nextMessage<RaceInit>('init');
  const { repositoryModule } = (await import(`../../src/repositories/${store}/index.js`)) as {
    repositoryModule: RepositoryModule;
  };
  const repo = await repositoryModule.create(repositoryModule.optionsSchema.parse(JSON.parse(json ?? '{}')));
  try {
    const init = await initMessage;
    // Warm the connection so the first batch does not pay for connection setup while others race.
    await repo.contains(`warm-${init.owner}`);
    const go = nextMessage<{ type: 'go' }>('go');
    await send({ type: 'ready' });
    await go;
    await send(await race(repo, init));
  } finally {
    await repo.close();
  }
}

main().then(
  () => process.disconnect?.(),
  async (error: unknown) => {
    const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
    await send({ type: 'error', message }).catch(() => {});
    process.exitCode = 1;
    process.disconnect?.();
  },
);
