import { InvalidInputError } from '../../errors.js';
import type { CapturedResponse } from './capture.js';

// A stored response is JSON with the body in base64, so any bytes (images, gzip, invalid UTF-8) survive every
// store's string field and replay byte for byte.

/** Turns a captured response into the string kept with the record. */
export function encodeResponse(response: CapturedResponse): string {
  return JSON.stringify({
    v: 1,
    status: response.status,
    headers: response.headers,
    body: response.body.toString('base64'),
  });
}

/** Reads a stored response back; a record that is not one (another writer, a newer format) is refused. */
export function decodeResponse(text: string): CapturedResponse {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new InvalidInputError('stored HTTP response', `is not JSON (${(error as Error).message})`);
  }
  const stored = value as { v?: unknown; status?: unknown; headers?: unknown; body?: unknown } | null;
  if (
    stored?.v !== 1 ||
    typeof stored.status !== 'number' ||
    typeof stored.body !== 'string' ||
    typeof stored.headers !== 'object' ||
    stored.headers === null
  ) {
    throw new InvalidInputError('stored HTTP response', 'is not a response stored by the HTTP adapter');
  }
  return {
    status: stored.status,
    headers: stored.headers as CapturedResponse['headers'],
    body: Buffer.from(stored.body, 'base64'),
  };
}
