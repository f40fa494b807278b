import { InvalidIdError } from '../errors.js';
import { toKey } from '../store/ids.js';
import { jsonIdReader } from '../util/json-id.js';

/** The id of one input line, or why it has none. */
export type IdOutcome = { readonly id: string } | { readonly reason: string };

/**
 * Compiles `--id`: one dotted path (`event.id`), or several separated by commas (`user.id,type`) whose values
 * together form the id: the JSON array of their canonical strings, so `["a,b","c"]` and `["a","b,c"]` differ.
 */
export function compileId(expression: string): (line: Uint8Array) => IdOutcome {
  const paths = expression.split(',').map((p) => p.trim());
  if (paths.some((p) => p === '' || p.split('.').some((step) => step === ''))) {
    throw new InvalidIdError(
      `bad --id ${JSON.stringify(expression)}: expected dotted paths separated by commas`,
    );
  }
  const parts = paths.map((path) => ({ path, read: jsonIdReader(path) }));
  const one = parts.length === 1 ? parts[0] : undefined;
  if (one) {
    return (line) => {
      const part = partOf(one, line);
      return typeof part === 'string' ? { id: part } : part;
    };
  }
  return (line) => {
    const values: string[] = [];
    for (const part of parts) {
      const value = partOf(part, line);
      if (typeof value !== 'string') return value;
      values.push(value);
    }
    try {
      return { id: toKey(JSON.stringify(values)) };
    } catch (error) {
      if (error instanceof InvalidIdError) return { reason: error.message };
      throw error;
    }
  };
}

function partOf(
  part: { path: string; read: ReturnType<typeof jsonIdReader> },
  line: Uint8Array,
): string | { reason: string } {
  const verdict = part.read(line);
  if (verdict.ok) return verdict.id ?? { reason: `no id at ${part.path}` };
  if (verdict.reason === 'invalid-id') return { reason: verdict.detail };
  const text = Buffer.from(line.buffer, line.byteOffset, line.byteLength).toString('utf8');
  return { reason: text.trim() === '' ? 'empty line' : `invalid JSON (${verdict.detail})` };
}
