import type { Cluster, Redis } from 'ioredis';

/** How long a measured offset to the server's clock is trusted before it is measured again. */
const OFFSET_TTL_MS = 10_000;

/**
 * The server's time for the writes that carry a time but run no script (a Cluster's lazy mark, a plain `SET … PX`).
 * One `TIME` round trip, compensated by half of it, every {@link OFFSET_TTL_MS}: an error of about half a round
 * trip plus ten seconds of drift, far below any TTL. On a Cluster, the clock of whichever node answers.
 */
export class ServerTime {
  readonly #client: Redis | Cluster;
  #offset = 0;
  #measuredAt = Number.NEGATIVE_INFINITY;
  #measuring: Promise<void> | undefined;

  constructor(client: Redis | Cluster) {
    this.#client = client;
  }

  /** The server's time now, in epoch ms (one `TIME` round trip when the offset is stale). */
  async now(): Promise<number> {
    if (Date.now() - this.#measuredAt > OFFSET_TTL_MS) {
      this.#measuring ??= this.#measure().finally(() => {
        this.#measuring = undefined;
      });
      await this.#measuring;
    }
    return Date.now() + this.#offset;
  }

  async #measure(): Promise<void> {
    const sent = Date.now();
    const [seconds, micros] = await this.#client.time();
    const received = Date.now();
    const server = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    this.#offset = server - (sent + received) / 2;
    this.#measuredAt = received;
  }
}
