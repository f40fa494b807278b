/**
 * The side effect of the inbox example: one row in `payments` per payment record. The table has no unique
 * constraint on `message_id` on purpose, so a payment applied twice shows as a second row instead of an error.
 * The worker, its test and bench/postgres-inbox.ts all write through these functions.
 */
import type { ClientBase, Pool } from 'pg';

/** One record of the input topic: `{"id": "...", "amount": <int>}`. */
export interface Payment {
  readonly id: string;
  readonly amount: number;
}

/** A record whose value is not a payment; the worker dead-letters it (or retries it while no DLQ is set). */
export class InvalidPaymentError extends Error {
  override readonly name = 'InvalidPaymentError';
}

/**
 * The payment in a record's value. `id` is the id the Kafka adapter read from the value's `id` field (its
 * canonical text, the one the store deduplicates on), so the row and the mark always carry the same id.
 */
export function parsePayment(id: string, value: Buffer | null): Payment {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value?.toString('utf8') ?? 'null');
  } catch {
    throw new InvalidPaymentError('the value is not JSON');
  }
  const amount = (parsed as { amount?: unknown } | null)?.amount;
  if (!Number.isSafeInteger(amount)) throw new InvalidPaymentError('"amount" must be an integer');
  return { id, amount: amount as number };
}

// An advisory lock key (any constant): two workers starting together must not race on CREATE TABLE, which
// fails with a unique violation on pg_type when both create it at once.
const DDL_LOCK = 727_019;

/** Creates `payments` when it is missing. Safe to run from several workers at once. */
export async function createPaymentsTable(pool: Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [DDL_LOCK]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS payments (
         id bigserial PRIMARY KEY,
         message_id text NOT NULL,
         amount bigint NOT NULL,
         created_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    await client.query('CREATE INDEX IF NOT EXISTS payments_message_id ON payments (message_id)');
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/**
 * Applies one payment: the handler's whole side effect. `db` is the transaction's client (the mark commits
 * with this row) or the pool (the row commits on its own).
 */
export async function insertPayment(db: Pick<ClientBase, 'query'>, payment: Payment): Promise<void> {
  await db.query({
    name: 'payments-insert',
    text: 'INSERT INTO payments (message_id, amount) VALUES ($1, $2)',
    values: [payment.id, payment.amount],
  });
}

/** Applies many payments in one statement (a whole-batch handler's side effect). */
export async function insertPayments(
  db: Pick<ClientBase, 'query'>,
  payments: readonly Payment[],
): Promise<void> {
  if (payments.length === 0) return;
  await db.query({
    name: 'payments-insert-many',
    text: 'INSERT INTO payments (message_id, amount) SELECT * FROM unnest($1::text[], $2::bigint[])',
    values: [payments.map((p) => p.id), payments.map((p) => p.amount)],
  });
}
