import { randomBytes } from 'node:crypto';
import { ClaimLostError, InvalidIdError } from '../errors.js';
import { idOfKey, MAX_ID_BYTES, toKey } from '../store/ids.js';
import { markIds } from '../store/mark.js';
import { type SingleKeyVerbs, singleKeyVerbs } from '../store/single-key.js';
import type {
  AddEntry,
  AddOptions,
  AddResult,
  IdempotencyRecord,
  MaybePromise,
  MessageId,
} from '../store/types.js';
import type { HeldClaims } from './lease-renewal.js';
import { idExtractor, idSource, replayEpochPrefix, reservedKey, reservedKeyError } from './message-id.js';
import type { ResolvedConsumerOptions } from './options.js';
import {
  type Batch,
  type Decision,
  type DedupRule,
  isThenable,
  type RuleTraits,
  type StoreGuard,
} from './rule.js';
import type { ConsumerStats } from './stats.js';

/** What one batch learned from the store. */
interface ProcessingTimeState {
  /** Eager: the owner token of this batch's claims (a recycled state keeps its own; see `begin`). */
  readonly owner: string;
  /** Per head: FRESH when this batch claimed (eager) or found absent (lazy) its key, else the record holding it. */
  readonly found: (IdempotencyRecord | typeof FRESH | undefined)[];
  /** Eager, a batch of one: its claim's options and its claim, made once since a recycled state serves many calls. */
  readonly one:
    | { readonly claimOptions: AddOptions; readonly claim: { id: MessageId; owner: string } }
    | undefined;
}

const FRESH = 0;

const NEW: Decision = Object.freeze({ kind: 'new', claims: true });
const EMPTY_ID = 'id is empty';

/**
 * Processing-time deduplication (the default), in Apache Camel's two flavours: eager claims each key before the
 * handler and confirms or releases it after; lazy reads before the handler and marks after success.
 */
export class ProcessingTimeRule<M> implements DedupRule<M, ProcessingTimeState> {
  readonly traits: RuleTraits<M>;
  readonly #options: ResolvedConsumerOptions<M>;
  readonly #stats: ConsumerStats;
  /** The store's single-key verbs for batches of one (every `wrap` call), resolved once. */
  readonly #one: SingleKeyVerbs;
  readonly #eager: boolean;
  /** Every batch runs inside one of the repository's transactions (the `transaction` option). */
  readonly #transactional: boolean;
  /** Every lazy mark's options, and a confirm's when it keeps no outcome. */
  readonly #ttl: { readonly ttlMs: number };
  /** `replayEpoch`'s prefix of every store id (undefined: ids stored as read). */
  readonly #epoch: string | undefined;
  readonly #maxIdBytes: number;
  // Owner tokens: one random prefix per consumer and a counter, unique without a syscall per claim.
  readonly #ownerPrefix = `${randomBytes(6).toString('base64url')}.`;
  #ownerSeq = 0;

  constructor(options: ResolvedConsumerOptions<M>, stats: ConsumerStats) {
    this.#options = options;
    this.#stats = stats;
    this.#one = singleKeyVerbs(options.repository);
    this.#eager = options.mode === 'eager';
    this.#transactional = options.transaction !== false;
    this.#ttl = { ttlMs: options.ttlMs };
    this.#epoch = replayEpochPrefix(options.replayEpoch);
    this.#maxIdBytes = options.repository.capabilities?.maxIdBytes ?? MAX_ID_BYTES;
    this.traits = {
      mode: options.mode,
      idOf: idExtractor(options.id),
      idWhere: idSource(options.id),
      forwardsNoId: "nullId: 'forward'",
      keepsFailures: true,
      retentionMs: options.ttlMs,
    };
  }

  /** A recycled state (`spare`) keeps its owner token: its call settled every claim it made (docs/engine.md). */
  begin(batch: Batch<M>, spare?: ProcessingTimeState): ProcessingTimeState {
    const { ids, keys, results } = batch;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (id === undefined || results[i] !== undefined) continue;
      // An empty id is a value, not a missing id (only null/undefined are), and no store can hold it.
      if (id === '') results[i] = { outcome: 'failed', id, error: new InvalidIdError(EMPTY_ID) };
      else if (reservedKey(id)) results[i] = { outcome: 'failed', id, error: reservedKeyError() };
      else if (this.#epoch === undefined) keys[i] = id;
      else {
        // The epoch makes the id longer: one too long for the store fails alone, not the batch's store call.
        try {
          keys[i] = toKey(this.#epoch + id, this.#maxIdBytes);
        } catch (error) {
          results[i] = { outcome: 'failed', id, error };
        }
      }
    }
    const one = ids.length === 1;
    if (spare !== undefined && one && spare.found.length === 1) {
      spare.found[0] = undefined;
      return spare;
    }
    // Base 36: V8 caches decimal number texts, which then outlive the young generation (docs/engine.md).
    const owner = this.#eager ? this.#ownerPrefix + (this.#ownerSeq++).toString(36) : '';
    if (!one) return { owner, found: new Array(ids.length), one: undefined };
    const claims = this.#eager
      ? { claimOptions: this.#claimOptions(batch, owner), claim: { id: '', owner } }
      : undefined;
    return { owner, found: [undefined], one: claims };
  }

  /**
   * Claims written confirmed: in a transaction that keeps no outcome, nobody sees a claim before COMMIT and its
   * row lock holds off a concurrent one, so none needs a confirm (a failed one is rolled back or removed by id).
   */
  #claimsConfirmed(batch: Batch<M>): boolean {
    return this.#transactional && batch.kept === undefined;
  }

  /** An eager claim's options: a lease and an owner, or none for a claim written confirmed. */
  #claimOptions(batch: Batch<M>, owner: string): AddOptions {
    const { ttlMs, leaseMs } = this.#options;
    return this.#claimsConfirmed(batch) ? { ttlMs } : { ttlMs, leaseMs, owner };
  }

  held(state: ProcessingTimeState, batch: Batch<M>): HeldClaims | undefined {
    if (!this.#eager) return undefined;
    const ids: MessageId[] = [];
    for (const h of batch.heads) {
      if (state.found[h] === FRESH) ids.push(idOfKey(batch.keys[h] as string));
    }
    return ids.length === 0 ? undefined : { owner: state.owner, ids };
  }

  lookup(state: ProcessingTimeState, batch: Batch<M>): Promise<void> | undefined {
    const { heads } = batch;
    return heads.length === 1
      ? this.#lookupOne(state, batch, heads[0] as number)
      : this.#lookupMany(state, batch, heads);
  }

  /** What a claim (eager) or a read (lazy) found for a key: FRESH, or the live record that holds it. */
  #found(answer: AddResult | IdempotencyRecord | undefined): IdempotencyRecord | typeof FRESH {
    if (!this.#eager) return (answer as IdempotencyRecord | undefined) ?? FRESH;
    const r = answer as AddResult;
    return r.added ? FRESH : r.existing;
  }

  async #lookupMany(state: ProcessingTimeState, batch: Batch<M>, heads: readonly number[]): Promise<void> {
    const keys = heads.map((h) => batch.keys[h] as string);
    const repository = this.#options.repository;
    const { fingerprints } = batch;
    const answers = this.#eager
      ? await repository.addMany(
          fingerprints === undefined
            ? keys.map((key) => ({ id: idOfKey(key) }))
            : keys.map((key, k) => ({ id: idOfKey(key), fingerprint: fingerprints[heads[k] as number] })),
          this.#claimOptions(batch, state.owner),
        )
      : await repository.getMany(keys.map(idOfKey));
    for (let k = 0; k < heads.length; k++) state.found[heads[k] as number] = this.#found(answers[k]);
  }

  /** `lookup` for one key (every `wrap` call): no arrays, and no promise when the store answers at once. */
  #lookupOne(state: ProcessingTimeState, batch: Batch<M>, head: number): Promise<void> | undefined {
    const id = idOfKey(batch.keys[head] as string);
    const { found } = state;
    let answer: MaybePromise<AddResult | IdempotencyRecord | undefined>;
    if (this.#eager) {
      const fingerprint = batch.fingerprints?.[head];
      answer = this.#one.addDirect(
        id,
        state.one?.claimOptions ?? this.#claimOptions(batch, state.owner),
        fingerprint === undefined ? undefined : { fingerprint },
      );
    } else answer = this.#one.getDirect(id);
    if (isThenable(answer)) {
      return Promise.resolve(answer).then((r) => {
        found[head] = this.#found(r);
      });
    }
    found[head] = this.#found(answer);
    return undefined;
  }

  decide(state: ProcessingTimeState, batch: Batch<M>, i: number, winner: number | undefined): Decision {
    const found = state.found[batch.head[i] as number];
    const existing = found === FRESH ? undefined : found;
    // A repeat of a message this batch handles is a duplicate of it, whatever the store said.
    if (winner !== undefined || existing !== undefined) return { kind: 'existing', existing };
    // Fresh, or the store read failed under `storeFailure: 'process'` (nothing claimed: handled as new).
    return NEW;
  }

  handled(): void {}

  settle(state: ProcessingTimeState, batch: Batch<M>, store: StoreGuard): Promise<void> | undefined {
    const { heads } = batch;
    return heads.length === 1
      ? this.#settleOne(state, batch, store, heads[0] as number)
      : this.#settleMany(state, batch, store);
  }

  /** Eager: releases the failed messages' claims, then confirms the others in one call. Lazy: marks in one. */
  async #settleMany(state: ProcessingTimeState, batch: Batch<M>, store: StoreGuard): Promise<void> {
    const eager = this.#eager;
    const at: number[] = [];
    const release: string[] = [];
    for (const h of batch.heads) {
      if (state.found[h] !== FRESH) continue;
      const winner = batch.winner[h] as number;
      if (winner !== -1 && settles(batch, winner) && (eager || !batch.results[winner]?.failOpen))
        at.push(winner);
      else if (eager) release.push(batch.keys[h] as string);
    }
    const confirmedClaims = this.#claimsConfirmed(batch);
    if (release.length > 0 && this.#options.removeOnFailure) {
      // A claim written confirmed has no owner: removed by id (this transaction holds its row).
      const owner = confirmedClaims ? undefined : state.owner;
      await Promise.all(release.map((key) => this.#release(batch, store, idOfKey(key), owner)));
    }
    if (at.length === 0 || (eager && confirmedClaims)) return;
    const operation = eager ? 'confirm' : 'mark';
    const start = store.start(batch);
    let written: boolean[];
    try {
      written = await (eager ? this.#confirmMany(state, batch, at) : this.#markMany(batch, at));
      store.succeeded(batch, operation, start);
    } catch (error) {
      store.failed(batch, operation, start, error, at);
      return;
    }
    for (let k = 0; k < written.length; k++)
      if (!written[k]) this.#unwritten(operation, batch, at[k] as number);
  }

  async #confirmMany(state: ProcessingTimeState, batch: Batch<M>, at: readonly number[]): Promise<boolean[]> {
    const { keys, kept } = batch;
    const { owner } = state;
    if (at.length === 1) {
      const i = at[0] as number;
      return [await this.#confirmOne(state, batch, idOfKey(keys[i] as string), i)];
    }
    return this.#options.repository.confirmMany(
      at.map((i) => ({ id: idOfKey(keys[i] as string), owner, result: kept?.[i] })),
      this.#ttl,
    );
  }

  #markMany(batch: Batch<M>, at: readonly number[]): Promise<boolean[]> {
    const entries = at.map((i) => markEntry(batch, idOfKey(batch.keys[i] as string), i));
    return markIds(this.#options.repository, entries, this.#ttl);
  }

  /** `settle` for a batch of one key (every `wrap` call), with the single-key store calls. */
  #settleOne(
    state: ProcessingTimeState,
    batch: Batch<M>,
    store: StoreGuard,
    head: number,
  ): Promise<void> | undefined {
    if (state.found[head] !== FRESH) return undefined;
    const id = idOfKey(batch.keys[head] as string);
    const winner = batch.winner[head] as number;
    const eager = this.#eager;
    if (winner === -1 || !settles(batch, winner)) {
      if (!eager || !this.#options.removeOnFailure) return undefined;
      return this.#release(batch, store, id, this.#claimsConfirmed(batch) ? undefined : state.owner);
    }
    // Nothing to confirm for a claim written confirmed; nothing to mark for a message handled fail-open.
    if (eager ? this.#claimsConfirmed(batch) : batch.results[winner]?.failOpen) return undefined;
    const operation = eager ? 'confirm' : 'mark';
    const start = store.start(batch);
    let answer: MaybePromise<boolean>;
    try {
      answer = eager
        ? this.#confirmOne(state, batch, id, winner)
        : this.#one.markDirect(markEntry(batch, id, winner), this.#ttl);
    } catch (error) {
      store.failed(batch, operation, start, error, [winner]);
      return undefined;
    }
    if (isThenable(answer)) {
      return Promise.resolve(answer).then(
        (written: boolean) => this.#wrote(batch, store, operation, start, winner, written),
        (error: unknown) => store.failed(batch, operation, start, error, [winner]),
      );
    }
    this.#wrote(batch, store, operation, start, winner, answer);
    return undefined;
  }

  #confirmOne(
    state: ProcessingTimeState,
    batch: Batch<M>,
    id: MessageId,
    winner: number,
  ): MaybePromise<boolean> {
    const result = batch.kept?.[winner];
    const options = result === undefined ? this.#ttl : { ttlMs: this.#options.ttlMs, result };
    // A recycled state's claim object, its id set per call.
    let claim = state.one?.claim;
    if (claim === undefined) claim = { id, owner: state.owner };
    else claim.id = id;
    return this.#one.confirmDirect(claim, options);
  }

  #wrote(
    batch: Batch<M>,
    store: StoreGuard,
    operation: 'confirm' | 'mark',
    start: number,
    winner: number,
    written: boolean,
  ): void {
    store.succeeded(batch, operation, start);
    if (!written) this.#unwritten(operation, batch, winner);
  }

  /**
   * A confirm refused: the claim lapsed and another owner took the id (`lostClaim: 'error'`: a ClaimLostError).
   * A mark refused: another worker marked the id since the check (lazy mode's known race).
   */
  #unwritten(operation: 'confirm' | 'mark', batch: Batch<M>, i: number): void {
    const r = batch.results[i];
    if (operation === 'mark') {
      if (r?.outcome !== 'processed') return;
      this.#stats.raced++;
      batch.results[i] = { ...r, raced: true };
      return;
    }
    // A kept failure whose claim lapsed: nothing happened twice that the caller does not already know.
    if (r?.outcome === 'failed') return;
    this.#stats.claimsLost++;
    if (!r) return;
    batch.results[i] =
      this.#options.lostClaim === 'error'
        ? { outcome: 'failed', id: r.id, error: new ClaimLostError(r.id as string), claimLost: true }
        : { ...r, claimLost: true };
  }

  #release(
    batch: Batch<M>,
    store: StoreGuard,
    id: MessageId,
    owner: string | undefined,
  ): Promise<void> | undefined {
    const start = store.start(batch);
    let answer: MaybePromise<boolean>;
    try {
      answer = this.#one.removeDirect(id, owner);
    } catch (error) {
      this.#releaseFailed(batch, store, start, error);
      return undefined;
    }
    if (!isThenable(answer)) {
      store.succeeded(batch, 'release', start);
      return undefined;
    }
    return Promise.resolve(answer).then(
      () => store.succeeded(batch, 'release', start),
      (error: unknown) => this.#releaseFailed(batch, store, start, error),
    );
  }

  /** A release the store refused is not the message's failure: the claim lapses with its lease. */
  #releaseFailed(batch: Batch<M>, store: StoreGuard, start: number, error: unknown): void {
    this.#stats.releaseFailures++;
    store.ignored(batch, 'release', start, error);
  }
}

/** True when the winner's record is to be confirmed or marked: it was processed, or its failure is kept. */
function settles(batch: Batch<unknown>, winner: number): boolean {
  const outcome = batch.results[winner]?.outcome;
  return outcome === 'processed' || (outcome === 'failed' && batch.kept?.[winner] !== undefined);
}

/** A lazy mark's entry: the id, with the message's fingerprint and kept outcome if any. */
function markEntry(batch: Batch<unknown>, id: MessageId, winner: number): AddEntry {
  const fingerprint = batch.fingerprints?.[winner];
  const result = batch.kept?.[winner];
  return fingerprint === undefined && result === undefined ? { id } : { id, fingerprint, result };
}
