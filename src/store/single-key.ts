import type { BaseRepository } from './base.js';
import { markIds } from './mark.js';
import type {
  AddEntry,
  AddOptions,
  AddResult,
  ClaimRef,
  ConfirmOptions,
  IdempotencyRecord,
  IdempotentRepository,
  MarkOptions,
  MaybePromise,
  MessageId,
} from './types.js';

/**
 * The single-key verbs the consumer calls for a batch of one (every `wrap` call), resolved once per consumer:
 * the store's direct verbs (see `BaseRepository.addDirect`: answered at once where the store can), or its async
 * verbs for a repository written without them. The lazy one-key mark is a mark (`markDirect`, the `markMany`
 * family), as the many-key path's.
 */
export interface SingleKeyVerbs {
  add(id: MessageId, options: AddOptions, entry?: Omit<AddEntry, 'id'>): MaybePromise<AddResult>;
  get(id: MessageId): MaybePromise<IdempotencyRecord | undefined>;
  confirm(claim: ClaimRef, options: ConfirmOptions): MaybePromise<boolean>;
  remove(id: MessageId, owner?: string): MaybePromise<boolean>;
  mark(entry: AddEntry, options: MarkOptions): MaybePromise<boolean>;
}

/** The verbs as method calls on the store's direct verbs. */
class DirectVerbs implements SingleKeyVerbs {
  readonly #r: Pick<BaseRepository, DirectVerb>;
  constructor(r: Pick<BaseRepository, DirectVerb>) {
    this.#r = r;
  }
  add(id: MessageId, options: AddOptions, entry?: Omit<AddEntry, 'id'>): MaybePromise<AddResult> {
    return this.#r.addDirect(id, options, entry);
  }
  get(id: MessageId): MaybePromise<IdempotencyRecord | undefined> {
    return this.#r.getDirect(id);
  }
  confirm(claim: ClaimRef, options: ConfirmOptions): MaybePromise<boolean> {
    return this.#r.confirmDirect(claim, options);
  }
  remove(id: MessageId, owner?: string): MaybePromise<boolean> {
    return this.#r.removeDirect(id, owner);
  }
  mark(entry: AddEntry, options: MarkOptions): MaybePromise<boolean> {
    return this.#r.markDirect(entry, options);
  }
}

/** A repository, with the single-key fast path where it has one (every BaseRepository does). */
export type FastPath = IdempotentRepository & Partial<Pick<BaseRepository, DirectVerb>>;

type DirectVerb = 'addDirect' | 'getDirect' | 'confirmDirect' | 'removeDirect' | 'markDirect';
const DIRECT_VERBS: readonly DirectVerb[] = [
  'addDirect',
  'getDirect',
  'confirmDirect',
  'removeDirect',
  'markDirect',
];

/** The single-key verbs of `repository` (see {@link SingleKeyVerbs}). */
export function singleKeyVerbs(r: FastPath): SingleKeyVerbs {
  if (DIRECT_VERBS.every((verb) => typeof r[verb] === 'function')) {
    return new DirectVerbs(r as Pick<BaseRepository, DirectVerb>);
  }
  // A repository written without (the whole) fast path: its async verbs.
  return new DirectVerbs({
    addDirect: (id, options, entry) => r.add(id, options, entry),
    getDirect: (id) => r.get(id),
    confirmDirect: (claim, options) => r.confirm(claim, options),
    removeDirect: (id, owner) => r.remove(id, owner),
    markDirect: async (entry, options) => (await markIds(r, [entry], options))[0] === true,
  });
}
