import { isBrokerUnreachable } from './errors.js';

/** The backoff of every kafkajs client the package builds (build.ts), and of the reads retried below. */
export const RETRY_TIME_MS = { initial: 300, max: 10_000 } as const;

/** kafkajs's own default budget: what a client the package did not build (`fromKafkajs`) is given here. */
export const KAFKAJS_DEFAULT_RETRIES = 5;

/**
 * Runs `read` again, at most `retries` more times with the clients' backoff, while it fails because no broker
 * answered. kafkajs itself gives up at once on a request whose connection closed under it (a broker stopping):
 * its admin's offset call bails on anything but UNKNOWN_TOPIC_OR_PARTITION and the cluster's ListOffsets has no
 * retry, while a read sent while the broker is away waits in its connect retries. Only for reads: a write sent
 * again may be applied twice.
 */
export async function retryUnreachable<T>(retries: number, read: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      if (attempt >= retries || !isBrokerUnreachable(error)) throw error;
      const delay = Math.min(RETRY_TIME_MS.max, RETRY_TIME_MS.initial * 2 ** attempt);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
