import type { ProcessResult } from '../consumer/types.js';
import { errorMessage, InvalidIdError, InvalidInputError, NoMessageIdError } from '../errors.js';
import type { BadIdReason } from './message-id.js';
import { lastHeader, type MessageHeaders, type OutgoingMessage } from './port/index.js';

/** Header names a dead-letter record carries on top of the original record's own headers. */
export const dlqHeaders = {
  /** A {@link DlqReason}. */
  reason: 'idem.reason',
  /** The error message (at most {@link MAX_ERROR_CHARS}). */
  error: 'idem.error',
  /** The error's `code` if it has one, else its class name. */
  errorType: 'idem.error.type',
  topic: 'idem.topic',
  partition: 'idem.partition',
  offset: 'idem.offset',
  /** Handler attempts made (0 when the record was never handled, e.g. invalid JSON). */
  attempts: 'idem.attempts',
  /** The original record's timestamp (the DLQ record gets a fresh one, so DLQ retention counts from now). */
  timestamp: 'idem.timestamp',
} as const;

/**
 * Why a record was dead-lettered: the handler kept failing (`handler-failed`); its id could not be read
 * (`invalid-json`, `invalid-id`); or the consumer refused it: no id under `nullId: 'reject'` (`no-id`), or input
 * it cannot judge such as a bad event timestamp (`invalid-input`).
 */
export type DlqReason = 'handler-failed' | 'no-id' | 'invalid-input' | BadIdReason;

/** Longest error message copied into a header (huge messages would bloat every DLQ record). */
export const MAX_ERROR_CHARS = 4096;

/** The original record as read (the port's `ConsumedMessage` and kafkajs's `KafkaMessage` fit). */
export interface SourceMessage {
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers?: MessageHeaders;
  readonly offset: string;
  readonly timestamp: string;
}

/** One record on its way to the DLQ, with where it came from and why. */
export interface DeadLetter {
  readonly topic: string;
  readonly partition: number;
  readonly message: SourceMessage;
  readonly reason: DlqReason;
  /** An Error (its message and code/name are copied) or a plain description. */
  readonly error: unknown;
  readonly attempts: number;
}

/** The dead letter of `message`, read from `topic`/`partition` (`attempts`: handler runs made). */
export function deadLetter(
  topic: string,
  partition: number,
  message: SourceMessage,
  reason: DlqReason,
  error: unknown,
  attempts = 0,
): DeadLetter {
  return { topic, partition, message, reason, error, attempts };
}

/** A decided record: `ack` (commit past it), `retry` (another's claim, a handler failure), `dead-letter`. */
export type RecordFate =
  | { readonly fate: 'ack' }
  | { readonly fate: 'retry'; readonly kind: 'in-progress' | 'handler'; readonly error: unknown }
  | { readonly fate: 'dead-letter'; readonly reason: DlqReason; readonly error: unknown };

const ACK: RecordFate = Object.freeze({ fate: 'ack' });

/** `handled`: the handler ran, so a failure is the handler's. */
export function recordFate(result: ProcessResult, handled: boolean): RecordFate {
  const { outcome, error } = result;
  if (outcome === 'processed' || outcome === 'duplicate' || outcome === 'no-id') return ACK;
  if (outcome === 'in-progress') return { fate: 'retry', kind: 'in-progress', error };
  // Same id, another payload (the consumer's `fingerprint` option): it can never be handled.
  if (outcome === 'conflict') return { fate: 'dead-letter', reason: 'invalid-input', error };
  // Refused before any handler ran (no id under `reject`, an id no store can hold, a bad event timestamp): forever.
  const reason = handled ? undefined : refusalReason(error);
  return reason ? { fate: 'dead-letter', reason, error } : { fate: 'retry', kind: 'handler', error };
}

function refusalReason(error: unknown): DlqReason | undefined {
  if (error instanceof NoMessageIdError) return 'no-id';
  if (error instanceof InvalidIdError) return 'invalid-id';
  return error instanceof InvalidInputError ? 'invalid-input' : undefined;
}

/** What {@link readDeadLetter} finds in a DLQ record's headers. */
export interface DeadLetterInfo {
  readonly reason: string;
  readonly error: string;
  readonly errorType: string | undefined;
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly attempts: number;
  readonly timestamp: string | undefined;
}

/**
 * The DLQ record: the original key, value and headers, plus the `idem.*` headers (replacing any the original
 * carried, e.g. a replayed dead letter). Placed by key, so records of one key keep their order in the DLQ.
 */
export function deadLetterMessage(letter: DeadLetter): OutgoingMessage {
  const { message, error } = letter;
  const headers: MessageHeaders = {
    ...message.headers,
    [dlqHeaders.reason]: letter.reason,
    [dlqHeaders.error]: errorText(error),
    [dlqHeaders.topic]: letter.topic,
    [dlqHeaders.partition]: String(letter.partition),
    [dlqHeaders.offset]: message.offset,
    [dlqHeaders.attempts]: String(letter.attempts),
    [dlqHeaders.timestamp]: message.timestamp,
  };
  const code = (error as { code?: unknown } | null)?.code;
  if (error instanceof Error) headers[dlqHeaders.errorType] = typeof code === 'string' ? code : error.name;
  return { key: message.key, value: message.value, headers };
}

/** What dead letters are sent through: the port's producer or transaction, or a kafkajs `Producer` as it is. */
export interface DeadLetterSender {
  send(request: { topic: string; acks?: -1; messages: OutgoingMessage[] }): Promise<unknown>;
}

/** Writes dead letters in one request (`acks: -1`): once it resolves, the caller may commit past the originals. */
export async function sendDeadLetters(
  producer: DeadLetterSender,
  dlqTopic: string,
  letters: readonly DeadLetter[],
): Promise<void> {
  if (letters.length === 0) return;
  await producer.send({ topic: dlqTopic, acks: -1, messages: letters.map(deadLetterMessage) });
}

/** Reads the `idem.*` headers back from a DLQ record; undefined when the record has none. */
export function readDeadLetter(headers: MessageHeaders | undefined): DeadLetterInfo | undefined {
  const get = (name: string): string | undefined => lastHeader(headers?.[name])?.toString();
  const reason = get(dlqHeaders.reason);
  if (reason === undefined) return undefined;
  return {
    reason,
    error: get(dlqHeaders.error) ?? '',
    errorType: get(dlqHeaders.errorType),
    topic: get(dlqHeaders.topic) ?? '',
    partition: Number(get(dlqHeaders.partition)),
    offset: get(dlqHeaders.offset) ?? '',
    attempts: Number(get(dlqHeaders.attempts) ?? 0),
    timestamp: get(dlqHeaders.timestamp),
  };
}

function errorText(error: unknown): string {
  const text = errorMessage(error);
  return text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS - 3)}...` : text;
}
