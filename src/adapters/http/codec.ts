import { isUtf8 } from 'node:buffer';
import { InvalidInputError } from '../../errors.js';
import type { CapturedResponse } from './capture.js';

// Two stored forms. A textual response whose body is UTF-8 without NUL is kept as text: `2 <status>`, one
// `name:value` line per header value (values hold no line break, names no colon), a blank line, the body. Any
// other (binary, no content type, NUL, which PostgreSQL's text refuses) is JSON with a base64 body, the form
// earlier versions kept for every response.

/** Media types kept in the text form (when their body is UTF-8 without NUL). */
const TEXTUAL =
  /^(?:text\/|application\/(?:[\w.-]+\+)?(?:json|xml)(?![\w.+-])|application\/(?:javascript|x-www-form-urlencoded)(?![\w.+-]))/i;

/** Turns a captured response into the string kept with the record. */
export function encodeResponse(response: CapturedResponse): string {
  const { status, headers, body } = response;
  const type = headers['content-type'];
  // A NUL is looked for in the text (a JS search), not in the bytes (a second native call per response).
  const text =
    typeof type === 'string' && isTextual(type) && isUtf8(body) ? body.toString('utf8') : undefined;
  if (text === undefined || text.includes('\0')) {
    return JSON.stringify({ v: 1, status, headers, body: body.toString('base64') });
  }
  // Joined, not concatenated: `+` makes a tree of string pieces, which the store would keep (and the garbage
  // collector copy) piece by piece; `join` makes one flat string.
  const parts = [`2 ${status}`];
  for (const name in headers) {
    const value = headers[name] as string | readonly string[];
    if (typeof value === 'string') parts.push(`${name}:${value}`);
    else for (const item of value) parts.push(`${name}:${item}`);
  }
  parts.push('', text);
  return parts.join('\n');
}

/** The last content type tested and its answer: a route answers with one type, tested once, not per response. */
let lastType = '';
let lastTextual = false;

function isTextual(type: string): boolean {
  if (type !== lastType) {
    lastTextual = TEXTUAL.test(type);
    lastType = type;
  }
  return lastTextual;
}

/** Reads a stored response back; a record that is not one (another writer, a newer format) is refused. */
export function decodeResponse(text: string): CapturedResponse {
  return text.startsWith('2 ') ? decodeText(text) : decodeJson(text);
}

function decodeText(text: string): CapturedResponse {
  const end = text.indexOf('\n\n');
  if (end === -1) throw notAResponse();
  // Read line by line in place (no array of lines): the head ends at the first blank line, `end`.
  let at = text.indexOf('\n', 2);
  const status = Number(text.slice(2, at));
  if (!Number.isInteger(status)) throw notAResponse();
  // A plain object, as JSON.parse makes (one without a prototype is a slow dictionary to read and copy); own
  // properties only, so a header named `__proto__` or `constructor` stays a header.
  const headers: Record<string, string | string[]> = {};
  while (at < end) {
    const start = at + 1;
    at = text.indexOf('\n', start);
    const colon = text.indexOf(':', start);
    if (colon < start + 1 || colon > at) throw notAResponse();
    const name = text.slice(start, colon);
    const value = text.slice(colon + 1, at);
    const seen = Object.hasOwn(headers, name) ? headers[name] : undefined;
    // A name on several lines was a list of values (Set-Cookie).
    const values = seen === undefined ? value : typeof seen === 'string' ? [seen, value] : [...seen, value];
    if (name !== '__proto__') headers[name] = values;
    else
      Object.defineProperty(headers, name, {
        value: values,
        enumerable: true,
        writable: true,
        configurable: true,
      });
  }
  return { status, headers, body: Buffer.from(text.slice(end + 2), 'utf8') };
}

function decodeJson(text: string): CapturedResponse {
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
    throw notAResponse();
  }
  return {
    status: stored.status,
    headers: stored.headers as CapturedResponse['headers'],
    body: Buffer.from(stored.body, 'base64'),
  };
}

function notAResponse(): InvalidInputError {
  return new InvalidInputError('stored HTTP response', 'is not a response stored by the HTTP adapter');
}
