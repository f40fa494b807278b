import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Maps `items` through `fn` with at most `limit` calls in flight, keeping input order. On the first failure no
 * new call starts and the returned promise rejects; calls already in flight finish on their own.
 */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const lane = async (): Promise<void> => {
    while (!failed && next < items.length) {
      const index = next++;
      try {
        results[index] = await fn(items[index] as T, index);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}

/** Splits a list into chunks of at most `size` (BatchGetItem takes 100 keys, BatchWriteItem 25 requests). */
export function chunk<T>(items: readonly T[], size: number): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size));
  return chunks;
}

const BACKOFF_BASE_MS = 25;
const BACKOFF_CAP_MS = 2_000;

/** Waits before retry number `attempt` (0-based): exponential with full jitter, as AWS recommends for batches. */
export function backoff(attempt: number): Promise<void> {
  const ceiling = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt);
  return sleep(Math.random() * ceiling);
}
