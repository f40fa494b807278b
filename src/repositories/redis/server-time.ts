import type { Cluster, Redis } from 'ioredis';

/** How long a measured offset to the server's clock is trusted before it is measured again. */
const OFFSET_TTL_MS = 10_000;

/**
 * The server's time for writes that run no script (a Cluster's lazy mark): one `TIME` round trip, less half of
 * it, every {@link OFFSET_TTL_MS}, an error far below any TTL. On a Cluster, whichever node answers.
 */
export function serverTime(client: Redis | Cluster): () => Promise<number> {
  let offset = 0;
  let measuredAt = Number.NEGATIVE_INFINITY;
  let measuring: Promise<void> | undefined;
  const measure = async () => {
    const sent = Date.now();
    const [seconds, micros] = await client.time();
    const received = Date.now();
    offset = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - (sent + received) / 2;
    measuredAt = received;
  };
  return async () => {
    if (Date.now() - measuredAt > OFFSET_TTL_MS) {
      measuring ??= measure().finally(() => {
        measuring = undefined;
      });
      await measuring;
    }
    return Date.now() + offset;
  };
}
