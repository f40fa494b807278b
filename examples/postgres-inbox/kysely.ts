/**
 * Kysely inside the consumer's transaction: the handler's queries must run on the `pg` client the consumer
 * opened the transaction on (`postgresTransaction(context)`), so that the row commits with the mark. Kysely
 * takes a pool; `kyselyOn(client)` gives it a pool of that one client, which it never releases or ends (the
 * consumer commits or rolls back, then gives the client back to its pool). docs/postgres-inbox.md shows this
 * file, and test/examples/kysely-transaction.test.ts runs it against PostgreSQL.
 */
import type { HandlerContext } from 'idempotent-consumer';
import { postgresTransaction } from 'idempotent-consumer/postgres';
import { type Generated, Kysely, PostgresDialect, type PostgresPoolClient } from 'kysely';
import type pg from 'pg';
import type { Payment } from './payments.js';

/** The example's tables, as Kysely sees them. */
export interface InboxDatabase {
  payments: {
    id: Generated<string>;
    message_id: string;
    amount: number;
    created_at: Generated<Date>;
  };
}

/**
 * A Kysely whose every query runs on `client`, an already open connection (here: inside the consumer's
 * `BEGIN`). Do not call `db.transaction()` on it: the transaction is open already, and the consumer ends it.
 */
export function kyselyOn<DB>(client: pg.ClientBase): Kysely<DB> {
  const borrowed: PostgresPoolClient = {
    query: client.query.bind(client) as PostgresPoolClient['query'],
    // Kysely "releases" after each query: the client stays in the transaction, and the consumer releases it.
    release: () => undefined,
  };
  return new Kysely<DB>({
    dialect: new PostgresDialect({
      pool: { options: {}, connect: async () => borrowed, end: async () => undefined },
    }),
  });
}

/** The inbox handler's side effect written with Kysely: the row commits with the id's mark, or neither does. */
export async function applyPayment(context: HandlerContext, payment: Payment): Promise<void> {
  const db = kyselyOn<InboxDatabase>(postgresTransaction(context));
  await db.insertInto('payments').values({ message_id: payment.id, amount: payment.amount }).execute();
}
