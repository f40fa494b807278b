import { after, before, describe } from 'node:test';
import { MySqlRepository } from '../../src/repositories/mysql/index.js';
import { repositoryContract } from '../contract/index.js';
import { createTestTable, testTable } from '../helpers/mysql.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

describe('mysql', { skip: skipUnlessEnabled('mysql') }, () => {
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
    name: 'mysql',
    factory: async ({ namespace }) => MySqlRepository.open({ url: endpoints.mysqlUrl, table, namespace }),
    capabilities: {
      persistent: true,
      shared: true,
      maxIdBytes: 1024,
      nativeBatch: true,
      maxResultBytes: 1_048_576,
    },
  });
});
