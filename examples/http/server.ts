/**
 * A small Express app behind the `Idempotency-Key` adapter: `POST /charges` counts its side effects,
 * `POST /payouts` is slow (a retry sent while it runs gets 409), `GET /side-effects` returns the count. Every
 * request signs in with `Authorization: Bearer <token>` (two demo users), and keys are scoped to the user, so
 * one user's response is never replayed to another. The store comes from config:
 * `IDEM_CONFIG=path/to/idem.toml` (its `[repository]` and `[consumer]` tables, `IDEM__…` env overrides apply),
 * else the memory store.
 *
 *   PORT=3000 npx tsx examples/http/server.ts
 *
 * It imports the package by its name, so it runs the same from an installed copy (in this checkout,
 * tsconfig.json's `paths` map the name to the source). docs/http.md walks through it with curl.
 */
import type { Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import express, { type Express } from 'express';
import type { IdempotentRepository } from 'idempotent-consumer';
import { configSections, loadConfig, openRepository } from 'idempotent-consumer/config';
import { type HttpIdempotencyOptions, idempotencyKey } from 'idempotent-consumer/http';
import { z } from 'zod';

/** The demo users and their bearer tokens; a real app verifies a session or a JWT here. */
export const demoTokens: Readonly<Record<string, string>> = {
  'alice-token': 'alice',
  'bob-token': 'bob',
};

/** How long `POST /payouts` works before it answers, by default. */
export const PAYOUT_MS = 2_000;

/** The signed-in user of a request, from its bearer token; undefined when it has none or an unknown one. */
function userOf(req: express.Request): string | undefined {
  const match = /^Bearer (\S+)$/.exec(req.get('authorization') ?? '');
  return match ? demoTokens[match[1] as string] : undefined;
}

/** Refuses a request without a known bearer token, before the adapter (which scopes keys to the user). */
const authenticate: express.RequestHandler = (req, res, next) => {
  if (userOf(req) === undefined) {
    res
      .status(401)
      .set('www-authenticate', 'Bearer')
      .json({ error: 'sign in with Authorization: Bearer <token>' });
    return;
  }
  next();
};

/** The app and its side-effect counter. */
export interface ExampleApp {
  readonly app: Express;
  /** How many charges the route really made. */
  readonly sideEffects: () => number;
}

/**
 * Builds the example app; without `idempotency` the routes run bare (the benchmark's baseline). The adapter
 * options are those of `idempotencyKey(...)`; the app sets `scope` itself, to the signed-in user.
 */
export function createExampleApp(
  idempotency?: Omit<HttpIdempotencyOptions<express.Request>, 'scope'>,
  options: { readonly payoutMs?: number } = {},
): ExampleApp {
  let count = 0;
  const app = express();
  const guard: express.RequestHandler[] = idempotency
    ? [idempotencyKey({ ...idempotency, scope: userOf })]
    : [];
  app.post('/charges', authenticate, express.json(), ...guard, (req, res) => {
    count++;
    const id = `ch_${count}`;
    const { amount = 0, currency = 'eur' } = (req.body ?? {}) as { amount?: number; currency?: string };
    res.status(201).location(`/charges/${id}`).json({ id, amount, currency });
  });
  app.post('/payouts', authenticate, express.json(), ...guard, async (req, res) => {
    count++;
    const id = `po_${count}`;
    // A slow bank call: a retry with the same key while it runs gets 409 in-progress with Retry-After.
    await sleep(options.payoutMs ?? PAYOUT_MS);
    const { amount = 0 } = (req.body ?? {}) as { amount?: number };
    res.status(201).location(`/payouts/${id}`).json({ id, amount });
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
  /** `[consumer.encryption]`, when the config sets it: stored responses are then encrypted. */
  readonly encryption?: HttpIdempotencyOptions<express.Request>['encryption'];
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
    ...(config.consumer.encryption ? { encryption: config.consumer.encryption } : {}),
  };
}

/** `86400000` → `24 h`: the expiry as clients read it. */
function inWords(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${ms / 1_000} s`;
}

async function main(): Promise<Server> {
  const { repository, ttlMs, leaseMs, type, encryption } = await openExampleStore();
  const { app } = createExampleApp({ repository, ttlMs, leaseMs, ...(encryption ? { encryption } : {}) });
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
