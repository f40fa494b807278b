import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeProblems, typecheck } from '../helpers/typecheck.js';

// Issue 20, §4: `r.result` was `R | undefined` even after checking `r.outcome === 'processed'`.
const program = `
import { IdempotencyConflictError, IdempotentConsumer, type ProcessResult } from 'idempotent-consumer';
import { MemoryRepository } from 'idempotent-consumer/memory';

interface Charge { id: string; amount: number }
interface Receipt { receiptId: string }

const consumer = new IdempotentConsumer<Charge>({ repository: new MemoryRepository(), id: 'id' });

export async function charge(c: Charge): Promise<Receipt | undefined> {
  const r = await consumer.process(c, async (): Promise<Receipt> => ({ receiptId: 'r-1' }));
  switch (r.outcome) {
    case 'processed': {
      const receipt: Receipt = r.result; // Receipt, not Receipt | undefined
      return receipt;
    }
    case 'duplicate':
      return r.replayed ? r.result : undefined;
    case 'conflict':
      return r.error satisfies IdempotencyConflictError ? undefined : undefined;
    case 'failed':
      throw r.error;
    case 'no-id': {
      const none: undefined = r.id;
      return none ?? r.result;
    }
    case 'in-progress':
      return undefined;
  }
}

export function exhaustive(r: ProcessResult<number>): number {
  if (r.outcome === 'processed' || r.outcome === 'no-id') return r.result;
  // Every outcome may be read without narrowing, as before.
  return r.existing?.expiresAt ?? (r.error === undefined ? 0 : 1);
}

export function duplicateMayLackIt(r: ProcessResult<number>): number {
  if (r.outcome !== 'duplicate') return 0;
  // @ts-expect-error: a duplicate's result is there only when it was replayed
  const n: number = r.result;
  return n;
}
`;

describe('ProcessResult is a union discriminated by outcome', () => {
  it('narrows result and error by outcome in strict TypeScript', () => {
    const problems = typecheck({ 'result-types.ts': program });
    assert.deepEqual(problems, [], describeProblems(problems));
  });
});
