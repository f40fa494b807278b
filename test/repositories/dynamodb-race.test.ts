import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDbRepository } from '../../src/repositories/dynamodb/index.js';
import { claimedNotOnce, runRace } from '../helpers/race.js';
import { soakSize } from '../helpers/soak.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

/**
 * Ids every worker claims. Each id is contested by all four workers (each claims the whole list, in its own
 * order), so every id is a race the conditional put must decide: 2,500 ids are 10,000 contested claims, enough
 * for the overlap of four processes' batches to put many ids in flight at once on dynalite. The soak size is what
 * CI ran before: dynalite is one Node process, and 10,000 ids (50,000 writes) took 247 s of a CI run.
 */
const IDS = soakSize('DYNAMODB_RACE_IDS', { ci: 2_500, soak: 10_000 });

describe('dynamodb cross-process race', { skip: skipUnlessEnabled('dynamodb') }, () => {
  it(`4 processes claiming the same ${IDS.toLocaleString('en')} ids in batches: each id is claimed exactly once`, async (t) => {
    const connection = {
      table: `idem-race-${randomUUID().slice(0, 8)}`,
      endpoint: endpoints.dynamodbEndpoint,
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    };
    const repo = await DynamoDbRepository.open({
      ...connection,
      createTable: true,
      logger: { warn: () => {} },
    });
    t.after(async () => {
      await repo.close();
      const admin = new DynamoDBClient({ region: 'us-east-1', ...connection });
      await admin.send(new DeleteTableCommand({ TableName: connection.table })).catch(() => {});
      admin.destroy();
    });
    const ids = Array.from({ length: IDS }, (_, i) => `order-${i}`);

    const result = await runRace({
      store: 'dynamodb',
      // dynalite is one Node process: 4 workers x 8 puts in flight keep it busy without queueing for long.
      options: { ...connection, batchConcurrency: 8 },
      ids,
      workers: 4,
      batchSize: 500,
      mode: 'eager',
      confirm: true,
      // Far longer than the race may take on a busy machine: an id re-claimed after its record expired would be
      // legitimate and hide nothing, but would fail the count below.
      ttlMs: 3_600_000,
      leaseMs: 3_600_000,
      timeoutMs: 900_000,
    });

    assert.deepEqual(claimedNotOnce(result).slice(0, 20), [], 'ids claimed by no worker or by several');
    assert.equal(
      result.workers.reduce((n, w) => n + w.won.length, 0),
      ids.length,
    );
    for (const worker of result.workers) assert.deepEqual(worker.unconfirmed, [], worker.owner);
    // Every record is now its winner's confirmed one.
    const winner = new Map(result.workers.flatMap((w) => w.won.map((id) => [id, w.owner] as const)));
    const sample = ids.filter((_, i) => i % 100 === 0);
    const records = await repo.getMany(sample);
    records.forEach((record, i) => {
      assert.equal(record?.state, 'confirmed', sample[i]);
      assert.ok(winner.has(sample[i] as string));
    });
  });
});
