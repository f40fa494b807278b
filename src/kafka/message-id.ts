import { isUtf8 } from 'node:buffer';
import { z } from 'zod';
import { IdempotencyError } from '../errors.js';
import { toKey } from '../store/ids.js';
import { jsonIdReader } from '../util/json-id.js';
import { lastHeader, type MessageHeaders } from './port/index.js';

/**
 * Where a record's message id comes from: the record key, one header, or a dotted path into the JSON value.
 * Config form: `id = { from = "key" }`, `{ from = "header", name = "event-id" }`, `{ from = "value", path = "meta.id" }`.
 */
export const idSourceSchema = z.discriminatedUnion('from', [
  z.object({ from: z.literal('key') }).strict(),
  z.object({ from: z.literal('header'), name: z.string().min(1) }).strict(),
  z
    .object({
      from: z.literal('value'),
      path: z.string().regex(/^[^.]+(\.[^.]+)*$/, 'expected a dotted field path such as "meta.id"'),
    })
    .strict(),
]);

export type IdSource = z.output<typeof idSourceSchema>;

/** The parts of a record an id can come from (the port's `ConsumedMessage` and kafkajs's `KafkaMessage` fit). */
export interface RecordParts {
  readonly key?: Buffer | null;
  readonly value: Buffer | null;
  readonly headers?: MessageHeaders;
}

/** Why a record's id cannot be used; such a record belongs in the DLQ (it would fail the same way forever). */
export type BadIdReason = 'invalid-json' | 'invalid-id';

/** A record's id: `ok` with its canonical key (undefined: none, KIP-655), or a reason and a detail. */
export type IdVerdict =
  | { readonly ok: true; readonly id: string | undefined }
  | { readonly ok: false; readonly reason: BadIdReason; readonly detail: string };

const NO_ID: IdVerdict = Object.freeze({ ok: true, id: undefined });

/**
 * Compiles an id source into a reader (its path split once) that never throws, by docs/kafka.md's Message ids
 * table: key or header bytes are a text id when valid UTF-8, else binary (a repeated header counts by its
 * last value, as Java's `lastHeader`); a value path is read from the JSON bytes, not `JSON.parse`.
 */
export function messageIdReader(source: IdSource): (record: RecordParts) => IdVerdict {
  switch (source.from) {
    case 'key':
      return (record) => guard(() => fromBytes(record.key));
    case 'header': {
      const name = source.name;
      return (record) => guard(() => fromHeader(record.headers?.[name]));
    }
    case 'value': {
      const read = jsonIdReader(source.path);
      return (record) => fromValue(record.value, read);
    }
  }
}

/** One-off form of {@link messageIdReader}. */
export function messageIdOf(record: RecordParts, source: IdSource): IdVerdict {
  return messageIdReader(source)(record);
}

function fromHeader(header: MessageHeaders[string]): string | undefined {
  const value = lastHeader(header);
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value === '' ? undefined : toKey(value);
  return fromBytes(value);
}

function fromBytes(bytes: Buffer | null | undefined): string | undefined {
  if (!bytes || bytes.byteLength === 0) return undefined;
  return isUtf8(bytes) ? toKey(bytes.toString('utf8')) : toKey(bytes);
}

function fromValue(value: Buffer | null, read: ReturnType<typeof jsonIdReader>): IdVerdict {
  if (value === null) return NO_ID;
  const verdict = read(value);
  if (verdict.ok || verdict.reason === 'invalid-id') return verdict;
  return { ok: false, reason: 'invalid-json', detail: `value is not valid JSON: ${verdict.detail}` };
}

/** Turns the id checks' exceptions (oversized, lone surrogate, wrong type) into an `invalid-id` verdict. */
function guard(read: () => string | undefined): IdVerdict {
  try {
    const id = read();
    return id === undefined ? NO_ID : { ok: true, id };
  } catch (error) {
    if (error instanceof IdempotencyError) {
      return { ok: false, reason: 'invalid-id', detail: error.message };
    }
    throw error;
  }
}
