/**
 * Cassandra repository: eager LWT claims through the batch path (`addMany`, batches of 1000, bounded concurrency)
 * against the stack's node (CASSANDRA_CONTACT_POINTS), next to the baseline measured in the same run: a
 * sequential loop of single LWT claims (`add`). For scale it also measures the node's ceiling, bare driver
 * `INSERT … IF NOT EXISTS` at the same concurrency without the repository, sweeps `batchConcurrency`, and times
 * batch reads and confirms. Lazy mode's batch (one `getMany`, then one `markMany`: plain `INSERT … USING TTL`, no
 * LWT) is measured beside the eager batch (`addMany` LWT claims, then `confirmMany`), target lazy >= 5x eager.
 * Prints figures and ratios; asserts nothing.
 *
 *   node --import tsx bench/repositories/cassandra.ts [--ids 20000] [--sequential 1000] [--batch 1000]
 *                                                     [--concurrency 32,64,128,256] [--json figures.json]
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Client, types } from 'cassandra-driver';
import { CassandraRepository, cassandraDefaults } from '../../src/repositories/cassandra/index.js';
import { FigureSink } from '../report/figures.js';

const { values } = parseArgs({
  options: {
    ids: { type: 'string', default: '20000' },
    sequential: { type: 'string', default: '1000' },
    batch: { type: 'string', default: '1000' },
    concurrency: { type: 'string', default: '32,64,128,256' },
    json: { type: 'string' },
  },
});
const IDS = Number(values.ids);
const SEQUENTIAL = Number(values.sequential);
const BATCH = Number(values.batch);
const SWEEP = values.concurrency.split(',').map(Number);
const CONTACT_POINTS = (process.env.CASSANDRA_CONTACT_POINTS ?? '127.0.0.1:9042').split(',');
const CLAIM = { ttlMs: 10 * 60_000, leaseMs: 60_000, owner: 'bench' };
const run = randomUUID().slice(0, 8);
const sink = new FigureSink(
  'cassandra',
  `node --import tsx bench/repositories/cassandra.ts --ids ${IDS} --sequential ${SEQUENTIAL} --batch ${BATCH} ` +
    `--concurrency ${values.concurrency}`,
);

const connection = { contactPoints: CONTACT_POINTS, keyspace: 'idem_bench', table: 'bench_ids' };
const opened: CassandraRepository[] = [];
async function open(namespace: string, batchConcurrency = cassandraDefaults.batchConcurrency as number) {
  const repo = await CassandraRepository.open({ ...connection, namespace, batchConcurrency });
  opened.push(repo);
  return repo;
}

const ids = (label: string, count: number) => Array.from({ length: count }, (_, i) => `${label}-${run}-${i}`);

/** Seconds taken by `body`. */
async function seconds(body: () => Promise<void>): Promise<number> {
  const start = process.hrtime.bigint();
  await body();
  return Number(process.hrtime.bigint() - start) / 1e9;
}

const perSecond = (count: number, secs: number) => Math.round(count / secs);
const fmt = (n: number) => n.toLocaleString('en-US');

/** addMany in batches; returns claims/s and checks every id was new (a bench that silently measures duplicates lies). */
async function batchClaims(repo: CassandraRepository, list: string[]): Promise<number> {
  let added = 0;
  const secs = await seconds(async () => {
    for (let i = 0; i < list.length; i += BATCH) {
      const results = await repo.addMany(
        list.slice(i, i + BATCH).map((id) => ({ id })),
        CLAIM,
      );
      added += results.filter((r) => r.added).length;
    }
  });
  if (added !== list.length) console.log(`  (warning: ${list.length - added} ids were not new)`);
  return perSecond(list.length, secs);
}

async function main(): Promise<void> {
  // Schema once, and a warm-up so JIT and prepared statements do not count against the first figure.
  const setup = await CassandraRepository.open({
    ...connection,
    namespace: `warm-${run}`,
    createSchema: true,
  });
  opened.push(setup);
  await setup.addMany(
    ids('warm', 2000).map((id) => ({ id })),
    CLAIM,
  );
  console.log(`cassandra LWT claims, ${CONTACT_POINTS.join(',')}, run ${run}`);

  const sequentialRepo = await open(`seq-${run}`);
  const seqIds = ids('seq', SEQUENTIAL);
  const seqSecs = await seconds(async () => {
    for (const id of seqIds) await sequentialRepo.add(id, CLAIM);
  });
  const sequential = perSecond(SEQUENTIAL, seqSecs);
  console.log(`  baseline, sequential add() loop: ${fmt(sequential)} claims/s (${SEQUENTIAL} ids)`);

  const batchRepo = await open(`batch-${run}`);
  const batchIds = ids('batch', IDS);
  const batched = await batchClaims(batchRepo, batchIds);
  console.log(
    `  addMany, batches of ${BATCH}, concurrency ${cassandraDefaults.batchConcurrency}: ${fmt(batched)} claims/s ` +
      `(${IDS} ids) = ${(batched / sequential).toFixed(1)}x the sequential loop; target 5,000/s`,
  );

  // Full batch cycles on new ids, as the consumer runs them: eager claim + confirm, lazy check + mark.
  const cycleIds = Math.min(IDS, 10_000);
  const eagerIds = ids('eager', cycleIds);
  const eagerSecs = await seconds(async () => {
    for (let i = 0; i < eagerIds.length; i += BATCH) {
      const part = eagerIds.slice(i, i + BATCH);
      await batchRepo.addMany(
        part.map((id) => ({ id })),
        CLAIM,
      );
      await batchRepo.confirmMany(
        part.map((id) => ({ id, owner: CLAIM.owner })),
        { ttlMs: CLAIM.ttlMs },
      );
    }
  });
  const lazyIds = ids('lazy', cycleIds);
  let marked = 0;
  const lazySecs = await seconds(async () => {
    for (let i = 0; i < lazyIds.length; i += BATCH) {
      const part = lazyIds.slice(i, i + BATCH);
      const found = await batchRepo.getMany(part);
      const absent = part.filter((_, k) => found[k] === undefined);
      for (const ok of await batchRepo.markMany(
        absent.map((id) => ({ id })),
        { ttlMs: CLAIM.ttlMs },
      ))
        if (ok) marked++;
    }
  });
  if (marked !== cycleIds) console.log(`  (warning: ${cycleIds - marked} lazy ids were not new)`);
  const eagerRate = perSecond(cycleIds, eagerSecs);
  const lazyRate = perSecond(cycleIds, lazySecs);
  console.log(`  eager batch (addMany LWT claims + confirmMany), ${cycleIds} ids: ${fmt(eagerRate)} ids/s`);
  console.log(
    `  lazy batch (getMany + markMany plain INSERTs), ${cycleIds} ids: ${fmt(lazyRate)} ids/s = ` +
      `${(lazyRate / eagerRate).toFixed(1)}x eager; target 5x`,
  );
  sink.figure('eager batch (addMany + confirmMany)', eagerRate, 'ids/s');
  sink.figure('lazy batch (getMany + markMany)', lazyRate, 'ids/s');
  sink.figure('sequential add() loop (LWT)', sequential, 'ids/s');
  sink.figure(`addMany LWT claims, batches of ${BATCH}`, batched, 'ids/s');
  sink.ratio({
    id: 'cassandra.lazy-vs-eager',
    label: `Cassandra lazy batch (getMany + markMany) vs eager batch (addMany + confirmMany), batches of ${BATCH}`,
    value: lazyRate / eagerRate,
    target: 5,
    kind: 'min',
    baseline: 'eager batch, same run',
  });

  // The node's ceiling: bare prepared LWTs, same table and concurrency, no repository code around them.
  const raw = new Client({ contactPoints: CONTACT_POINTS, localDataCenter: 'datacenter1' });
  try {
    await raw.connect();
    const rawIds = ids('raw', 10_000);
    const insert =
      'INSERT INTO idem_bench.bench_ids (ns, bucket, id, state, expires_at, lease_expires_at, owner) ' +
      'VALUES (?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS USING TTL 600';
    const lwt = {
      prepare: true,
      consistency: types.consistencies.localQuorum,
      serialConsistency: types.consistencies.localSerial,
    };
    let next = 0;
    const rawSecs = await seconds(async () => {
      await Promise.all(
        Array.from({ length: cassandraDefaults.batchConcurrency }, async () => {
          while (next < rawIds.length) {
            const id = rawIds[next++] as string;
            await raw.execute(insert, [`raw-${run}`, next % 1024, id, 'in-flight', 1, 1, 'bench'], lwt);
          }
        }),
      );
    });
    const ceiling = perSecond(rawIds.length, rawSecs);
    console.log(
      `  LWT ceiling, bare driver LWTs at concurrency ${cassandraDefaults.batchConcurrency}: ${fmt(ceiling)}/s; ` +
        `addMany reaches ${((100 * batched) / ceiling).toFixed(0)}% of it`,
    );
    sink.figure('LWT ceiling: bare driver INSERT … IF NOT EXISTS', ceiling, 'ids/s');
    sink.ratio({
      id: 'cassandra.eager-vs-lwt-ceiling',
      label: `Cassandra addMany LWT claims, batches of ${BATCH}`,
      value: batched / ceiling,
      kind: 'min',
      baseline: 'bare driver LWTs, same concurrency',
    });
  } finally {
    await raw.shutdown();
  }

  // Other batch paths on the ids just claimed.
  const sample = batchIds.slice(0, 10_000);
  const readSecs = await seconds(async () => {
    for (let i = 0; i < sample.length; i += BATCH) await batchRepo.containsMany(sample.slice(i, i + BATCH));
  });
  console.log(`  containsMany (IN per bucket): ${fmt(perSecond(sample.length, readSecs))} ids/s`);
  const confirmSample = sample.slice(0, 5000);
  const confirmSecs = await seconds(async () => {
    for (let i = 0; i < confirmSample.length; i += BATCH) {
      await batchRepo.confirmMany(
        confirmSample.slice(i, i + BATCH).map((id) => ({ id, owner: CLAIM.owner })),
        { ttlMs: CLAIM.ttlMs },
      );
    }
  });
  console.log(
    `  confirmMany (read + LWT each): ${fmt(perSecond(confirmSample.length, confirmSecs))} claims/s`,
  );

  console.log('  batchConcurrency sweep (addMany claims/s, 5,000 ids each):');
  for (const concurrency of SWEEP) {
    const repo = await open(`sweep${concurrency}-${run}`, concurrency);
    const rate = await batchClaims(repo, ids(`sweep${concurrency}`, 5000));
    console.log(
      `    ${String(concurrency).padStart(4)}: ${fmt(rate)} claims/s = ${(rate / sequential).toFixed(1)}x`,
    );
  }

  // Leave no bench rows behind beyond their TTL: clear each namespace (partition deletes only).
  for (const repo of opened) await repo.clear();
  sink.write(values.json);
}

main()
  .catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(async () => {
    await Promise.allSettled(opened.map((repo) => repo.close()));
  });
