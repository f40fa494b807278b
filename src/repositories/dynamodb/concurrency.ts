import { setTimeout as sleep } from 'node:timers/promises';

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
