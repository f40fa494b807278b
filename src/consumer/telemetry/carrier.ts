import type { OtelGetter, TraceCarrier } from './api.js';

/**
 * Reads trace headers from a {@link TraceCarrier}: Kafka header values come as bytes (or lists of them), HTTP
 * ones as text or lists; a propagator wants text.
 */
export const carrierGetter: OtelGetter<TraceCarrier> = {
  keys: (carrier) => (typeof carrier === 'function' ? [] : Object.keys(carrier)),
  get: (carrier, key) => text(typeof carrier === 'function' ? carrier(key) : carrier[key]),
};

function text(value: unknown): string | string[] | undefined {
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array)
    return Buffer.from(value.buffer, value.byteOffset, value.length).toString();
  if (Array.isArray(value)) return value.map(text).filter((v): v is string => typeof v === 'string');
  return undefined;
}
