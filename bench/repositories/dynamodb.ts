/**
 * DynamoDB repository against dynalite at DYNAMODB_ENDPOINT, with AWS Lambda Powertools idempotency
 * (`makeIdempotent` + `DynamoDBPersistenceLayer`) on the same server as the peer baseline, measured in the same run.
 * Every id is new, so each figure is the full claim path. Phases alternate over `--rounds` so a noisy machine
 * hits each about equally. Prints figures and ratios; asserts nothing.
 *
 * Lazy mode's batch (one `getMany`, then one `markMany`: BatchWriteItem puts, no condition) is measured beside the
 * eager batch (conditional put per id, then conditional update per id); the target is lazy >= 5x eager.
 *
 *   bash scripts/stack/up.sh dynamodb
 *   node --import tsx bench/repositories/dynamodb.ts [--seconds 3] [--rounds 6] [--batch 500] [--json figures.json]
 */
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { CreateTableCommand, DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { DynamoDbRepository } from '../../src/repositories/dynamodb/index.js';
import { FigureSink } from '../report/figures.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '3' },
    rounds: { type: 'string', default: '6' },
    batch: { type: 'string', default: '500' },
    json: { type: 'string' },
  },
});
const SECONDS = Number(values.seconds);
const ROUNDS = Number(values.rounds);
const BATCH = Number(values.batch);
const endpoint = process.env.DYNAMODB_ENDPOINT ?? 'http://127.0.0.1:4567';
const credentials = { accessKeyId: 'bench', secretAccessKey: 'bench' };
const run = randomUUID().slice(0, 8);
const TTL_MS = 3_600_000;
const LEASE_MS = 60_000;
const sink = new FigureSink(
  'dynamodb',
  `node --import tsx bench/repositories/dynamodb.ts --seconds ${SECONDS} --rounds ${ROUNDS} --batch ${BATCH}`,
);
const EAGER_BATCH = `ours addMany(${BATCH}) eager + confirmMany`;
const LAZY_BATCH = `ours getMany(${BATCH}) + markMany, lazy`;

// --- peer baseline: Powertools, its own table (partition key `id`, as its docs create it) -------------------
const ptTable = `idem-bench-pt-${run}`;
const admin = new DynamoDBClient({ region: 'us-east-1', endpoint, credentials: { ...credentials } });
await admin.send(
  new CreateTableCommand({
    TableName: ptTable,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
    KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
  }),
);
const ptConfig = new IdempotencyConfig({ eventKeyJmesPath: 'id', expiresAfterSeconds: TTL_MS / 1000 });
// Outside Lambda there is no context; a fixed remaining time gives its in-progress claims our lease.
ptConfig.registerLambdaContext({ getRemainingTimeInMillis: () => LEASE_MS } as Parameters<
  IdempotencyConfig['registerLambdaContext']
>[0]);
const powertools = makeIdempotent(async (message: { id: string }) => ({ ok: message.id.length }), {
  persistenceStore: new DynamoDBPersistenceLayer({
    tableName: ptTable,
    clientConfig: { region: 'us-east-1', endpoint, credentials: { ...credentials } },
  }),
  config: ptConfig,
  keyPrefix: 'bench',
});

// --- ours: one table, created by the repository ----------------------------------------------------------
const repo = await DynamoDbRepository.open({
  table: `idem-bench-${run}`,
  endpoint,
  credentials,
  createTable: true,
  logger: { warn: () => {} }, // dynalite has no UpdateTimeToLive; irrelevant to throughput
});
const consumer = new IdempotentConsumer<{ id: string }>({
  repository: repo,
  id: 'id',
  ttlMs: TTL_MS,
  leaseMs: LEASE_MS,
});
const wrapped = consumer.wrap(async (message) => ({ ok: message.id.length }));
const batchConsumer = new IdempotentConsumer<{ id: string }>({
  repository: repo,
  id: 'id',
  ttlMs: TTL_MS,
  leaseMs: LEASE_MS,
});

// --- reference: dynalite's own ceiling for conditional puts, with no SDK in the way -----------------------
// Any design that claims an id with one conditional put (ours, Powertools) is bounded by this; dynalite only checks
// that an Authorization header is present, so a fixed one does.
const ceilingTable = `idem-bench-raw-${run}`;
await admin.send(
  new CreateTableCommand({
    TableName: ceilingTable,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
    KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
  }),
);
const rawAgent = new Agent({ keepAlive: true, maxSockets: 64 });
const target = new URL(endpoint);
function rawPut(id: string): Promise<void> {
  const body = JSON.stringify({
    TableName: ceilingTable,
    Item: { id: { S: id }, state: { S: 'confirmed' } },
    ConditionExpression: 'attribute_not_exists(#id)',
    ExpressionAttributeNames: { '#id': 'id' },
  });
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        method: 'POST',
        agent: rawAgent,
        headers: {
          'content-type': 'application/x-amz-json-1.0',
          'x-amz-target': 'DynamoDB_20120810.PutItem',
          'x-amz-date': '20240101T000000Z',
          authorization:
            'AWS4-HMAC-SHA256 Credential=bench/20240101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0',
        },
      },
      (res) => {
        res.resume();
        res.on('end', () =>
          res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`)),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

let seq = 0;
const nextId = (label: string) => `${label}-${run}-${seq++}`;

/** Runs `step` (which handles `step()` ids) until the time box ends; returns [ids handled, seconds]. */
async function timed(step: () => Promise<number>): Promise<[number, number]> {
  const start = performance.now();
  const end = start + SECONDS * 1000;
  let n = 0;
  while (performance.now() < end) n += await step();
  return [n, (performance.now() - start) / 1000];
}

const phases: Record<string, () => Promise<number>> = {
  'powertools makeIdempotent, sequential': async () => {
    await powertools({ id: nextId('pt') });
    return 1;
  },
  'ours add + confirm, sequential': async () => {
    const id = nextId('seq');
    await repo.add(id, { ttlMs: TTL_MS, leaseMs: LEASE_MS, owner: 'bench' });
    await repo.confirm({ id, owner: 'bench' }, { ttlMs: TTL_MS });
    return 1;
  },
  'ours consumer.wrap (eager), sequential': async () => {
    await wrapped({ id: nextId('wrap') });
    return 1;
  },
  [EAGER_BATCH]: async () => {
    const ids = Array.from({ length: BATCH }, () => nextId('batch'));
    const claims = await repo.addMany(
      ids.map((id) => ({ id })),
      { ttlMs: TTL_MS, leaseMs: LEASE_MS, owner: 'bench' },
    );
    await repo.confirmMany(
      ids.filter((_, i) => claims[i]?.added).map((id) => ({ id, owner: 'bench' })),
      { ttlMs: TTL_MS },
    );
    return BATCH;
  },
  [LAZY_BATCH]: async () => {
    const ids = Array.from({ length: BATCH }, () => nextId('lazy'));
    const found = await repo.getMany(ids);
    const absent = ids.filter((_, i) => found[i] === undefined);
    await repo.markMany(
      absent.map((id) => ({ id })),
      { ttlMs: TTL_MS },
    );
    return BATCH;
  },
  [`ours consumer.processBatch(${BATCH}), eager`]: async () => {
    const messages = Array.from({ length: BATCH }, () => ({ id: nextId('pb') }));
    await batchConsumer.processBatch(messages, async (message) => message.id.length);
    return BATCH;
  },
  'reference: dynalite raw conditional PutItem, 32 in flight': async () => {
    const ids = Array.from({ length: 320 }, () => nextId('raw'));
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < ids.length) await rawPut(ids[next++] as string);
      }),
    );
    return ids.length;
  },
};

// Warm each path (connections, JIT) outside the measurement.
for (const step of Object.values(phases)) await step();

const totals = new Map<string, [number, number]>();
for (let round = 0; round < ROUNDS; round++) {
  for (const [label, step] of Object.entries(phases)) {
    const [n, s] = await timed(step);
    const [tn, ts] = totals.get(label) ?? [0, 0];
    totals.set(label, [tn + n, ts + s]);
  }
}

const rate = (label: string) => {
  const [n, s] = totals.get(label) as [number, number];
  return n / s;
};
console.log(
  `dynalite at ${endpoint}; ${ROUNDS} rounds x ${SECONDS} s per phase; all ids new; ` +
    `load average ${loadavg()[0]?.toFixed(1)} (other work on the machine skews every figure, ratios less)\n`,
);
for (const label of totals.keys()) {
  console.log(`${label.padEnd(58)} ${rate(label).toFixed(0).padStart(7)} ids/s`);
}
const base = rate('powertools makeIdempotent, sequential');
const ceiling = rate('reference: dynalite raw conditional PutItem, 32 in flight');
console.log('');
for (const label of [...totals.keys()].slice(1)) {
  console.log(`${label.padEnd(58)} ${(rate(label) / base).toFixed(2).padStart(6)}x powertools`);
}
console.log(
  `\nbatch bound on this server: a claim and a confirm are 2 conditional writes per id, so at most ` +
    `${(ceiling / 2).toFixed(0)} ids/s = ${(ceiling / 2 / base).toFixed(2)}x powertools`,
);
const lazyVsEager = rate(LAZY_BATCH) / rate(EAGER_BATCH);
console.log('targets: per message >= 1.5x, batch >= 10x');
console.log(
  `lazy batch vs eager batch: ${lazyVsEager.toFixed(2)}x (target >= 5: ${lazyVsEager >= 5 ? 'met' : 'MISSED'})`,
);
for (const label of totals.keys()) sink.figure(label, rate(label), 'ids/s');
sink.ratio({
  id: 'dynamodb.lazy-vs-eager',
  label: `DynamoDB lazy batch (getMany + markMany) vs eager batch (addMany + confirmMany), batches of ${BATCH}`,
  value: lazyVsEager,
  target: 5,
  kind: 'min',
  baseline: 'eager batch, same run',
});
sink.ratio({
  id: 'dynamodb.wrap-vs-powertools',
  label: 'DynamoDB consumer.wrap (eager), sequential',
  value: rate('ours consumer.wrap (eager), sequential') / base,
  target: 1.5,
  kind: 'min',
  baseline: 'Powertools makeIdempotent, sequential',
});
sink.ratio({
  id: 'dynamodb.batch-vs-powertools',
  label: `DynamoDB eager batch (addMany + confirmMany, ${BATCH})`,
  value: rate(EAGER_BATCH) / base,
  target: 10,
  kind: 'min',
  baseline: 'Powertools makeIdempotent, sequential',
});
sink.write(values.json);
console.log(
  `consumer stats: ${JSON.stringify(consumer.stats)}, batch: ${JSON.stringify(batchConsumer.stats)}`,
);

for (const TableName of [`idem-bench-${run}`, ptTable, ceilingTable]) {
  await admin.send(new DeleteTableCommand({ TableName })).catch(() => {});
}
await repo.close();
admin.destroy();
rawAgent.destroy();
