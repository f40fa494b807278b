import { randomUUID } from 'node:crypto';
import { after, before, describe } from 'node:test';
import { createPool } from 'mysql2/promise';
import { MySqlRepository, migrate } from '../../src/repositories/mysql/index.js';
import { repositoryContract } from '../contract/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

/** One table per run: every contract test has its own namespace in it. */
const table = `idem_contract_${randomUUID().slice(0, 8)}`;

describe('mysql', { skip: skipUnlessEnabled('mysql') }, () => {
  before(async () => {
    await migrate({ url: endpoints.mysqlUrl, table });
  });
  after(async () => {
    const pool = createPool(endpoints.mysqlUrl);
    await pool.query(`DROP TABLE IF EXISTS \`${table}\``);
    await pool.end();
  });

  repositoryContract({
    name: 'mysql',
    factory: async ({ namespace }) =>
      MySqlRepository.open({ url: endpoints.mysqlUrl, table, namespace, poolSize: 4 }),
    capabilities: {
      persistent: true,
      shared: true,
      maxIdBytes: 1024,
      nativeBatch: true,
      maxResultBytes: 1_048_576,
    },
  });
});
