/**
 * A small Express app behind the `Idempotency-Key` adapter: `POST /charges` counts its side effects,
 * `GET /side-effects` returns the count. The store comes from config: `IDEM_CONFIG=path/to/idem.toml` (its
 * `[repository]` and `[consumer]` tables, `IDEM__…` env overrides apply), else the memory store.
 *
 *   PORT=3000 npx tsx examples/http/server.ts
 *
 * docs/http.md walks through it with curl.
 */
import type { Server } from 'node:http';
import { pathToFileURL } from 'node:url';
import express, { type Express } from 'express';
import { z } from 'zod';
import { type HttpIdempotencyOptions, idempotencyKey } from '../../src/adapters/http/index.js';
import { configSections, loadConfig, openRepository } from '../../src/config/index.js';
import type { IdempotentRepository } from '../../src/repositories/types.js';

/** The app and its side-effect counter. */
export interface ExampleApp {
  readonly app: Express;
  /** How many charges the route really made. */
  readonly sideEffects: () => number;
}

/**
 * Builds the example app; without `idempotency` the route runs bare (the benchmark's baseline). The adapter
 * options are those of `idempotencyKey(...)`.
 */
export function createExampleApp(idempotency?: HttpIdempotencyOptions<express.Request>): ExampleApp {
  let count = 0;
  const app = express();
  const guard: express.RequestHandler[] = idempotency ? [idempotencyKey(idempotency)] : [];
  app.post('/charges', express.json(), ...guard, (req, res) => {
    count++;
    const id = `ch_${count}`;
    const { amount = 0, currency = 'eur' } = (req.body ?? {}) as { amount?: number; currency?: string };
    res.status(201).location(`/charges/${id}`).json({ id, amount, currency });
  });
  app.get('/side-effects', (_req, res) => {
    res.json({ count });
  });
  return { app, sideEffects: () => count };
}

/** The config the example reads: the shared `[repository]` and `[consumer]` tables. */
const configSchema = z.object(configSections).loose();

/** Opens the store named by `IDEM_CONFIG` (the memory store without it) and the consumer timings. */
export async function openExampleStore(env = process.env): Promise<{
  readonly repository: IdempotentRepository;
  readonly ttlMs: number;
  readonly leaseMs: number;
  readonly type: string;
}> {
  // No file: a one-line config selecting the memory store, which IDEM__REPOSITORY__TYPE may still override.
  const text = env.IDEM_CONFIG ? undefined : '[repository]\ntype = "memory"\n';
  const config = await loadConfig(configSchema, { env, ...(text ? { text } : {}) });
  const repository = await openRepository(config);
  return {
    repository,
    ttlMs: config.consumer.ttl,
    leaseMs: config.consumer.lease,
    type: config.repository.type,
  };
}

/** `86400000` → `24 h`: the expiry as clients read it. */
function inWords(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${ms / 1_000} s`;
}

async function main(): Promise<Server> {
  const { repository, ttlMs, leaseMs, type } = await openExampleStore();
  const { app } = createExampleApp({ repository, ttlMs, leaseMs });
  const port = Number(process.env.PORT ?? 3000);
  const server = app.listen(port, () => {
    console.log(
      `listening on http://127.0.0.1:${port} (store: ${type}; a key's response is replayed for ` +
        `${inWords(ttlMs)}, a request holds its key for ${inWords(leaseMs)})`,
    );
  });
  const stop = () => {
    server.close(() => {
      repository.close().then(() => process.exit(0));
    });
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return server;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
