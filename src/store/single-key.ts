import type { BaseRepository } from './base.js';
import { markIds } from './mark.js';
import type { IdempotentRepository } from './types.js';

const DIRECT_VERBS = ['addDirect', 'getDirect', 'confirmDirect', 'removeDirect', 'markDirect'] as const;

/**
 * The single-key verbs the consumer calls for a batch of one (every `wrap` call), resolved once per consumer: the
 * store's direct verbs (see `BaseRepository.addDirect`), else its async ones; the one-key mark is a `markMany`.
 */
export type SingleKeyVerbs = Pick<BaseRepository, (typeof DIRECT_VERBS)[number]>;

/** A repository, with the single-key fast path where it has one (every BaseRepository does). */
export type FastPath = IdempotentRepository & Partial<SingleKeyVerbs>;

/** The single-key verbs of `repository` (see {@link SingleKeyVerbs}). */
export function singleKeyVerbs(r: FastPath): SingleKeyVerbs {
  if (DIRECT_VERBS.every((verb) => typeof r[verb] === 'function')) return r as SingleKeyVerbs;
  return {
    addDirect: (id, options, entry) => r.add(id, options, entry),
    getDirect: (id, options) => r.get(id, options),
    confirmDirect: (claim, options) => r.confirm(claim, options),
    removeDirect: (id, owner) => r.remove(id, owner),
    markDirect: async (entry, options) => (await markIds(r, [entry], options))[0] === true,
  };
}
