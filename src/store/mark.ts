import type { AddEntry, IdempotentRepository, MarkOptions } from './types.js';

/**
 * The lazy mark of ids just read as absent: the store's `markMany` (its cheapest write, possibly blind), or
 * `addMany` for a repository written before that verb existed. False where a live record held the id (a race).
 */
export async function markIds(
  repository: IdempotentRepository,
  entries: readonly AddEntry[],
  options: MarkOptions,
): Promise<boolean[]> {
  if (repository.markMany) return repository.markMany(entries, options);
  const added = await repository.addMany(entries, options);
  return added.map((r) => r.added);
}
