import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { migrate } from '../../src/repositories/postgres/index.js';
import { endpoints } from './stores.js';

/** A fresh table name per run (`idem_test_<random>`), so runs and test files never share rows. */
export function testTable(label = 'test'): string {
  return `idem_${label}_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
}

/** Creates `table` through the shipped migration; answers a function that drops it again. */
export async function createTestTable(table: string): Promise<() => Promise<void>> {
  await migrate({ url: endpoints.postgresUrl, table });
  return async () => {
    const pool = new pg.Pool({ connectionString: endpoints.postgresUrl, max: 1 });
    try {
      await pool.query(
        `DROP TABLE IF EXISTS ${table
          .split('.')
          .map((p) => `"${p}"`)
          .join('.')}`,
      );
    } finally {
      await pool.end();
    }
  };
}

/** A pool of plain connections to the test server, for what the tests do beside the repository. */
export function testPool(max = 4): pg.Pool {
  const pool = new pg.Pool({ connectionString: endpoints.postgresUrl, max });
  pool.on('error', () => {});
  return pool;
}
