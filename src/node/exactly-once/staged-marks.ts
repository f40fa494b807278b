import { toKey } from '../../repositories/ids.js';
import type {
  AddEntry,
  AddOptions,
  AddResult,
  IdempotentRepository,
  MarkOptions,
  MessageId,
} from '../../repositories/types.js';

/** One mark the engine asked for, held until its chunk's transaction commits. */
export interface StagedMark {
  /** The canonical store key (also the changelog record's key). */
  readonly key: string;
  readonly id: MessageId;
  readonly ttlMs: number;
}

/**
 * The local store as the exactly-once chunk's engine sees it: reads go to the store, but the lazy mark (the
 * engine's settle step, right after the batch handler) is only recorded. The chunk then writes those marks to the
 * changelog inside its transaction and applies them to the store after the commit; an aborted or fenced
 * transaction drops them, so the store never holds a mark whose output was not committed.
 *
 * It stages rather than letting the batch handler own the commit because the engine calls no handler for a chunk
 * whose records are all duplicates (its offsets and dead letters still need a transaction), and decides some
 * failures only after the handler.
 */
export function stagingRepository(store: IdempotentRepository): {
  readonly repository: IdempotentRepository;
  /** The marks recorded since the last call, emptied. */
  take(): StagedMark[];
} {
  let staged: StagedMark[] = [];
  const stage = (entries: readonly AddEntry[], ttlMs: number) => {
    for (const { id } of entries) staged.push({ key: toKey(id), id, ttlMs });
  };
  const record = (id: MessageId, ttlMs: number) => {
    const now = Date.now();
    return { id: toKey(id), state: 'confirmed' as const, expiresAt: now + ttlMs };
  };
  const overrides: Partial<IdempotentRepository> = {
    async markMany(entries: readonly AddEntry[], options: MarkOptions): Promise<boolean[]> {
      stage(entries, options.ttlMs);
      return entries.map(() => true);
    },
    async addMany(entries: readonly AddEntry[], options: AddOptions): Promise<AddResult[]> {
      stage(entries, options.ttlMs);
      return entries.map((e) => ({ added: true, record: record(e.id, options.ttlMs) }));
    },
    async add(id: MessageId, options: AddOptions): Promise<AddResult> {
      stage([{ id }], options.ttlMs);
      return { added: true, record: record(id, options.ttlMs) };
    },
  };
  const repository = new Proxy(store, {
    get(target, property, receiver) {
      if (typeof property === 'string' && property in overrides) {
        return overrides[property as keyof IdempotentRepository];
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return {
    repository,
    take() {
      const marks = staged;
      staged = [];
      return marks;
    },
  };
}
