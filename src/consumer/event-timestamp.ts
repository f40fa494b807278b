import { errorMessage, InvalidInputError } from '../errors.js';
import { readPath } from './message-id.js';
import type { TimestampSelector } from './types.js';

// Date's own range; anything past it cannot be a real event time and would lose integer precision.
const MAX_TIME = 8.64e15;
const DIGITS = /^\d{1,16}$/;
// Only ISO-8601 dates are parsed: Date.parse accepts other formats differently on each engine.
const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

/** Reads a record's event timestamp as epoch ms, or answers (not throws) an InvalidInputError naming the field. */
export function timestampReader<M>(
  selector: TimestampSelector<M>,
): (message: M) => number | InvalidInputError {
  const location = typeof selector === 'function' ? 'timestamp selector' : `timestamp field "${selector}"`;
  const path = typeof selector === 'function' ? [] : selector.split('.');
  const raw = typeof selector === 'function' ? selector : (m: M) => readPath(m, path);
  return (message) => {
    let value: unknown;
    try {
      value = raw(message);
    } catch (error) {
      return new InvalidInputError(location, `threw ${errorMessage(error)}`);
    }
    const ms = toEpochMs(value);
    if (ms !== undefined) return ms;
    return new InvalidInputError(
      location,
      value === undefined || value === null || value === ''
        ? 'missing event timestamp'
        : `invalid event timestamp ${describe(value)}: expected epoch ms (a whole number >= 0), a Date or an ISO-8601 string`,
    );
  };
}

/** Epoch ms for an accepted timestamp value, undefined for anything else (negative = Kafka's "no timestamp"). */
export function toEpochMs(value: unknown): number | undefined {
  let ms: number;
  if (typeof value === 'number') ms = value;
  else if (typeof value === 'bigint')
    ms = value >= 0n && value <= BigInt(MAX_TIME) ? Number(value) : Number.NaN;
  else if (typeof value === 'string') {
    if (DIGITS.test(value)) ms = Number(value);
    else if (ISO_DATE.test(value)) ms = Date.parse(value);
    else return undefined;
  } else if (value instanceof Date) ms = value.getTime();
  else return undefined;
  return Number.isInteger(ms) && ms >= 0 && ms <= MAX_TIME ? ms : undefined;
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean')
    return String(value);
  if (value instanceof Date) return 'Invalid Date';
  return Array.isArray(value) ? 'array' : typeof value;
}
