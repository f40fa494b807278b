import { idExtractor } from '../consumer/message-id.js';
import { InvalidIdError } from '../errors.js';
import { toKey } from '../repositories/ids.js';

/** The id of a parsed line, or why it has none. */
export type IdOutcome = { readonly id: string } | { readonly reason: string };

/**
 * Compiles `--id`: one dotted path (`event.id`), or several separated by commas (`user.id,type`) whose values
 * together form the id. Paths only, never code. A composite id is the JSON array of its parts' canonical
 * strings, so `["a,b","c"]` and `["a","b,c"]` stay distinct.
 */
export function compileId(expression: string): (value: unknown) => IdOutcome {
  const paths = expression.split(',').map((p) => p.trim());
  if (paths.some((p) => p === '' || p.split('.').some((step) => step === ''))) {
    throw new InvalidIdError(
      `bad --id ${JSON.stringify(expression)}: expected dotted paths separated by commas`,
    );
  }
  const parts = paths.map((path) => ({ path, read: idExtractor<unknown>(path) }));
  const one = parts.length === 1 ? parts[0] : undefined;
  if (one) {
    return (value) => {
      const id = safeRead(one.read, value);
      if (typeof id === 'string') return { id };
      return { reason: id === undefined ? `no id at ${one.path}` : id.reason };
    };
  }
  return (value) => {
    const values: string[] = [];
    for (const part of parts) {
      const id = safeRead(part.read, value);
      if (typeof id !== 'string') return { reason: id === undefined ? `no id at ${part.path}` : id.reason };
      values.push(id);
    }
    try {
      return { id: toKey(JSON.stringify(values)) };
    } catch (error) {
      if (error instanceof InvalidIdError) return { reason: error.message };
      throw error;
    }
  };
}

function safeRead(
  read: (value: unknown) => string | undefined,
  value: unknown,
): string | undefined | { reason: string } {
  try {
    return read(value);
  } catch (error) {
    if (error instanceof InvalidIdError) return { reason: error.message };
    throw error;
  }
}
