/**
 * The check-and-mark workload of the RocksDB benches (bench/repositories/rocksdb.ts and rocksdb-growth.ts), in
 * one place so the growth curve measures exactly the shape of the store's table rows: batches of 1000 ids, 90%
 * new and 10% already stored, UUID-shaped ids spread over the key space, an injected clock.
 */
import { statSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { AddEntry, IdempotentRepository } from '../../src/store/types.js';

export const BATCH = 1000;
export const DUPLICATES = 0.1;
export const HOUR = 3_600_000;
export const TTL_MS = 24 * HOUR;
export const LEASE_MS = 60_000;
/** Stored ids arrive over this span of (injected) time, so they fill ~21 hourly buckets as in steady state. */
export const SPAN_MS = 20 * HOUR;
/** Injected clock origin: fixed, so a store cached on disk never expires between runs. */
export const BASE = Date.UTC(2030, 0, 1);

/**
 * Deterministic UUID-shaped id `n` of the series `tag`. The hex part comes first and depends on both, so every
 * series spreads over the whole key space like real ids (a shared prefix would cluster a series in a few
 * table blocks and flatter the lookups).
 */
export function id(n: number, tag = ''): string {
  let h = Math.imul(n ^ 0x9e3779b9, 0x85ebca6b) >>> 0;
  for (let i = 0; i < tag.length; i++) h = Math.imul(h ^ tag.charCodeAt(i), 0x01000193) >>> 0;
  const hex: string[] = [];
  for (let i = 0; i < 4; i++) {
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
    hex.push(h.toString(16).padStart(8, '0'));
  }
  const [a, b, c, d] = hex as [string, string, string, string];
  return `${a}-${b.slice(0, 4)}-${b.slice(4)}-${c.slice(0, 4)}-${c.slice(4)}${d}-${tag}${n}`;
}

/** Total size of the files under `dir`. */
export async function duSize(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += statSync(join(entry.parentPath, entry.name)).size;
  }
  return total;
}

/** A clock that starts at `origin` and then follows real time. */
export function clockFrom(origin: number): () => number {
  const start = performance.now();
  return () => origin + Math.floor(performance.now() - start);
}

/** `count` batches of new ids of series `prefix`, with ~10% of ids drawn from the `stored` ids 0..stored-1. */
export function workload(prefix: string, count: number, stored: number): AddEntry[][] {
  let seed = 42;
  const random = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  return Array.from({ length: count }, (_, b) =>
    Array.from({ length: BATCH }, (_, i) => ({
      id: random() < DUPLICATES ? id(Math.floor(random() * stored)) : id(b * BATCH + i, prefix),
    })),
  );
}

/** `lazy`: one addMany per batch; `consumer`: getMany then markMany, as the lazy consumer; `eager`: claims, confirms. */
export type Mode = 'lazy' | 'consumer' | 'eager';

/**
 * Check-and-mark over `batches` (lazy marks, or eager claims then confirmMany of the winners): µs per id of
 * wall time, and of CPU time of this process (all its threads), which a busy shared machine distorts less.
 */
export async function checkAndMark(
  repo: IdempotentRepository,
  batches: AddEntry[][],
  mode: Mode,
): Promise<{ wall: number; cpu: number }> {
  let duplicates = 0;
  const cpu = process.cpuUsage();
  const start = performance.now();
  for (const batch of batches) {
    if (mode === 'consumer') {
      // What the lazy consumer does: one lookup, then one mark of the ids it found absent.
      const found = await repo.getMany(batch.map((e) => e.id));
      const fresh: AddEntry[] = [];
      for (let i = 0; i < batch.length; i++) {
        if (found[i] === undefined) fresh.push(batch[i] as AddEntry);
        else duplicates++;
      }
      if (repo.markMany) await repo.markMany(fresh, { ttlMs: TTL_MS });
      else await repo.addMany(fresh, { ttlMs: TTL_MS });
    } else if (mode === 'eager') {
      const results = await repo.addMany(batch, { ttlMs: TTL_MS, leaseMs: LEASE_MS, owner: 'bench' });
      const claims = [];
      for (let i = 0; i < batch.length; i++) {
        if (results[i]?.added) claims.push({ id: batch[i]?.id as string, owner: 'bench' });
        else duplicates++;
      }
      await repo.confirmMany(claims, { ttlMs: TTL_MS });
    } else {
      for (const r of await repo.addMany(batch, { ttlMs: TTL_MS })) if (!r.added) duplicates++;
    }
  }
  const ids = batches.length * BATCH;
  const wall = ((performance.now() - start) * 1000) / ids;
  const used = process.cpuUsage(cpu);
  const share = duplicates / ids;
  if (Math.abs(share - DUPLICATES) > 0.02)
    throw new Error(`workload found ${share} duplicates, expected ~0.1`);
  return { wall, cpu: (used.user + used.system) / ids };
}
