/**
 * The key segment of a namespace (`keyPrefix`): the prefix without one trailing `:`, with `%` and `:` escaped as
 * `%25` and `%3A`, then `:`. The segment's only `:` is its last character, so no namespace's segment starts with
 * another's: `app:` and `app:orders:` become `app:` and `app%3Aorders:`, and `app:orders:42` under `app:` is a
 * different key from `42` under `app:orders:`. The common prefix without inner colons (`idem:`) is unchanged.
 * Braces are kept as they are: a `{hash tag}` in the prefix would pin every key to one Cluster slot, as before.
 */
export function namespaceSegment(prefix: string): string {
  const bare = prefix.endsWith(':') ? prefix.slice(0, -1) : prefix;
  return `${bare.replaceAll('%', '%25').replaceAll(':', '%3A')}:`;
}

/** Escapes glob metacharacters so a prefix matches itself in SCAN MATCH. */
export function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}
