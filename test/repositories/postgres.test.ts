import { after, before, describe } from 'node:test';
import { PostgresRepository } from '../../src/repositories/postgres/index.js';
import { repositoryContract } from '../contract/index.js';
import { createTestTable, testTable } from '../helpers/postgres.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

describe('postgres', { skip: skipUnlessEnabled('postgres') }, () => {
  // One table per run; each contract test has its own namespace in it.
  const table = testTable('contract');
  let drop: (() => Promise<void>) | undefined;
  before(async () => {
    drop = await createTestTable(table);
  });
  after(async () => {
    await drop?.();
  });

  repositoryContract({
    name: 'postgres',
    factory: async ({ namespace }) =>
      PostgresRepository.open({ url: endpoints.postgresUrl, table, namespace }),
    capabilities: {
      persistent: true,
      shared: true,
      maxIdBytes: 1024,
      nativeBatch: true,
      maxResultBytes: 1_048_576,
    },
  });
});
