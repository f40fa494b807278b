import { randomUUID } from 'node:crypto';
import { createPool, type Pool } from 'mysql2/promise';
import { migrate } from '../../src/repositories/mysql/index.js';
import { endpoints } from './stores.js';

/** A fresh table name per run (`idem_<label>_<random>`), so runs and test files never share rows. */
export function testTable(label = 'test'): string {
  return `idem_${label}_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
}

/** Creates `table` through the shipped migration; answers a function that drops it again. */
export async function createTestTable(table: string): Promise<() => Promise<void>> {
  await migrate({ url: endpoints.mysqlUrl, table });
  return async () => {
    const pool = testPool(1);
    try {
      await pool.query(`DROP TABLE IF EXISTS \`${table}\``);
    } finally {
      await pool.end();
    }
  };
}

/** A pool of plain connections to the test server, for what the tests do beside the repository. */
export function testPool(connectionLimit = 4): Pool {
  return createPool({ uri: endpoints.mysqlUrl, connectionLimit });
}
