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
 * the store's direct verbs (see `BaseRepository.addDirect`), or the async verbs of a repository without them.
 * The lazy one-key mark is a mark (`markDirect`, the `markMany` family), as the many-key path's.
 */
export interface SingleKeyVerbs {
  add(id: MessageId, options: AddOptions, entry?: Omit<AddEntry, 'id'>): MaybePromise<AddResult>;
  get(id: MessageId): MaybePromise<IdempotencyRecord | undefined>;
  confirm(claim: ClaimRef, options: ConfirmOptions): MaybePromise<boolean>;
  remove(id: MessageId, owner?: string): MaybePromise<boolean>;
  mark(entry: AddEntry, options: MarkOptions): MaybePromise<boolean>;
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
    const direct = r as Pick<BaseRepository, DirectVerb>;
    return {
      add: (id, options, entry) => direct.addDirect(id, options, entry),
      get: (id) => direct.getDirect(id),
      confirm: (claim, options) => direct.confirmDirect(claim, options),
      remove: (id, owner) => direct.removeDirect(id, owner),
      mark: (entry, options) => direct.markDirect(entry, options),
    };
  }
  return {
    add: (id, options, entry) => r.add(id, options, entry),
    get: (id) => r.get(id),
    confirm: (claim, options) => r.confirm(claim, options),
    remove: (id, owner) => r.remove(id, owner),
    mark: async (entry, options) => (await markIds(r, [entry], options))[0] === true,
  };
}
