import { randomBytes } from 'node:crypto';
import { ClaimLostError, InvalidIdError } from '../errors.js';
import { idOfKey } from '../repositories/ids.js';
import type { AddResult, IdempotencyRecord } from '../repositories/types.js';
import type { Batch, Decision, DedupRule, StoreGuard } from './engine.js';
import type { ResolvedConsumerOptions } from './options.js';
import type { ConsumerStats } from './stats.js';

/** What one batch learned from the store. */
interface ProcessingTimeState {
  /** Eager: the owner token of this batch's claims. */
  readonly owner: string;
  /** Keys this batch claimed (eager), or found absent (lazy): the ones it may handle as new. */
  readonly fresh: Set<string>;
  /** The live record that holds each other key. */
  readonly held: Map<string, IdempotencyRecord>;
}

const NEW: Decision = Object.freeze({ kind: 'new', claims: true });
const EMPTY_ID = 'id is empty';

/**
 * Processing-time deduplication (the default mode), in Apache Camel's two flavours:
 * - eager: one atomic claim per key before the handler (an in-flight record with a lease), confirmed after
 *   success, released after failure;
 * - lazy: one read before the handler, one mark after success.
 * Both answer from the stored record, so `in-progress` is reported the same way in either mode.
 */
export class ProcessingTimeRule<M> implements DedupRule<M, ProcessingTimeState> {
  readonly #options: ResolvedConsumerOptions<M>;
  readonly #stats: ConsumerStats;
  // Owner tokens: one random prefix per consumer and a counter, unique without a syscall per claim.
  readonly #ownerPrefix = randomBytes(6).toString('base64url');
  #ownerSeq = 0;

  constructor(options: ResolvedConsumerOptions<M>, stats: ConsumerStats) {
    this.#options = options;
    this.#stats = stats;
  }

  begin(batch: Batch<M>): ProcessingTimeState {
    const { ids, keys, results } = batch;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (id === undefined || results[i] !== undefined) continue;
      // An empty id is a value, not a missing id (only null/undefined are), and no store can hold it.
      if (id === '') results[i] = { outcome: 'failed', id, error: new InvalidIdError(EMPTY_ID) };
      else keys[i] = id;
    }
    const owner =
      this.#options.mode === 'eager' ? `${this.#ownerPrefix}.${(this.#ownerSeq++).toString(36)}` : '';
    return { owner, fresh: new Set(), held: new Map() };
  }

  async lookup(state: ProcessingTimeState, _batch: Batch<M>, keys: readonly string[]): Promise<void> {
    const repository = this.#options.repository;
    if (this.#options.mode === 'eager') {
      const { ttlMs, leaseMs } = this.#options;
      const options = { ttlMs, leaseMs, owner: state.owner };
      const added: AddResult[] =
        keys.length === 1
          ? [await repository.add(idOfKey(keys[0] as string), options)]
          : await repository.addMany(
              keys.map((key) => ({ id: idOfKey(key) })),
              options,
            );
      keys.forEach((key, k) => {
        const r = added[k] as AddResult;
        if (r.added) state.fresh.add(key);
        else state.held.set(key, r.existing);
      });
      return;
    }
    const records =
      keys.length === 1
        ? [await repository.get(idOfKey(keys[0] as string))]
        : await repository.getMany(keys.map(idOfKey));
    keys.forEach((key, k) => {
      const record = records[k];
      if (record === undefined) state.fresh.add(key);
      else state.held.set(key, record);
    });
  }

  decide(state: ProcessingTimeState, batch: Batch<M>, i: number, winner: number | undefined): Decision {
    const key = batch.keys[i] as string;
    // A repeat of a message this batch handles is a duplicate of it, whatever the store said.
    if (winner !== undefined) return { kind: 'existing', existing: state.held.get(key) };
    const existing = state.held.get(key);
    if (existing !== undefined) return { kind: 'existing', existing };
    // Fresh, or the store read failed under `storeFailure: 'process'` (nothing claimed: handled as new).
    return NEW;
  }

  handled(): void {}

  async settle(state: ProcessingTimeState, batch: Batch<M>, store: StoreGuard): Promise<void> {
    if (this.#options.mode === 'eager') await this.#settleClaims(state, batch, store);
    else await this.#mark(state, batch, store);
  }

  /** Confirms each claim whose message succeeded and releases every other claim of the batch. */
  async #settleClaims(state: ProcessingTimeState, batch: Batch<M>, store: StoreGuard): Promise<void> {
    const repository = this.#options.repository;
    const confirmKeys: string[] = [];
    const confirmAt: number[] = [];
    const release: string[] = [];
    for (const key of state.fresh) {
      const winner = batch.winners.get(key);
      if (winner !== undefined && batch.results[winner]?.outcome === 'processed') {
        confirmKeys.push(key);
        confirmAt.push(winner);
      } else {
        release.push(key);
      }
    }
    const { owner } = state;
    if (release.length > 0 && this.#options.removeOnFailure) {
      // A release the store refuses is not an error: the claim lapses with its lease.
      await Promise.all(
        release.map((key) =>
          repository.remove(idOfKey(key), owner).catch(() => {
            this.#stats.releaseFailures++;
          }),
        ),
      );
    }
    if (confirmKeys.length === 0) return;
    const { ttlMs } = this.#options;
    const confirmed = await store.run('confirm', confirmAt, async () =>
      confirmKeys.length === 1
        ? [await repository.confirm({ id: idOfKey(confirmKeys[0] as string), owner }, { ttlMs })]
        : await repository.confirmMany(
            confirmKeys.map((key) => ({ id: idOfKey(key), owner })),
            { ttlMs },
          ),
    );
    confirmed?.forEach((ok, k) => {
      if (!ok) this.#lost(batch, confirmAt[k] as number);
    });
  }

  /**
   * The claim lapsed and another owner took the id before our confirm: the caller must learn it. Under
   * `lostClaim: 'error'` the message fails with ClaimLostError (`wrap` throws it; a batch reports it), so a
   * caller that retries finds the other owner's claim instead of handling the message a third time.
   */
  #lost(batch: Batch<M>, i: number): void {
    this.#stats.claimsLost++;
    const r = batch.results[i];
    if (!r) return;
    batch.results[i] =
      this.#options.lostClaim === 'error'
        ? { outcome: 'failed', id: r.id, error: new ClaimLostError(r.id as string), claimLost: true }
        : { ...r, claimLost: true };
  }

  /** Lazy mode: marks the ids whose message succeeded, in one write. */
  async #mark(state: ProcessingTimeState, batch: Batch<M>, store: StoreGuard): Promise<void> {
    const keys: string[] = [];
    const at: number[] = [];
    for (const key of state.fresh) {
      const winner = batch.winners.get(key);
      if (winner === undefined) continue;
      const r = batch.results[winner];
      if (r?.outcome !== 'processed' || r.failOpen) continue;
      keys.push(key);
      at.push(winner);
    }
    if (keys.length === 0) return;
    const repository = this.#options.repository;
    const { ttlMs } = this.#options;
    const added = await store.run('mark', at, async () =>
      keys.length === 1
        ? [await repository.add(idOfKey(keys[0] as string), { ttlMs })]
        : await repository.addMany(
            keys.map((key) => ({ id: idOfKey(key) })),
            { ttlMs },
          ),
    );
    added?.forEach((r, k) => {
      if (r.added) return;
      this.#stats.raced++;
      const i = at[k] as number;
      const result = batch.results[i];
      if (result) batch.results[i] = { ...result, raced: true };
    });
  }
}
