import { z } from 'zod';

// The table each parse produced, to the older name it was given under: an error found after parsing (a store's
// own maximum) names the key the user wrote.
const olderNameGiven = new WeakMap<object, string>();

/** A parsed table whose renamed key carries its value under both names. */
type Renamed<T, K extends string, O extends string> = Omit<T, K | O> & { readonly [P in K | O]: number };

/**
 * A transform for a table whose key `key` was renamed from `older`: the value is whichever is given, else
 * `fallback`, under both names in the output. Both given with different values is refused.
 */
export function renamedKey<K extends string, O extends string>(key: K, older: O, fallback: number) {
  return <T extends { readonly [P in K | O]?: number }>(table: T, ctx: z.RefinementCtx): Renamed<T, K, O> => {
    const given: number | undefined = table[key];
    const old: number | undefined = table[older];
    if (given !== undefined && old !== undefined && given !== old) {
      ctx.addIssue({
        code: 'custom',
        path: [older],
        params: { quoteValue: false },
        message: `is the older name of ${key}, which is given too: ${older} = ${old} ms and ${key} = ${given} ms differ (give one)`,
      });
      return z.NEVER;
    }
    const value = given ?? old ?? fallback;
    const parsed = { ...table, [key]: value, [older]: value } as Renamed<T, K, O>;
    if (given === undefined && old !== undefined) olderNameGiven.set(parsed, older);
    return parsed;
  };
}

/** The name a parsed table's renamed key was given under: `older` when the user wrote that, else `key`. */
export function givenName(table: object, key: string): string {
  return olderNameGiven.get(table) ?? key;
}
