// "Did you mean" for a mistyped name: the CLI's flags and commands, a config file's keys.

/** The candidate nearest to `word` by edit distance (a swap of two neighbours counts as one edit). */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of candidates) {
    const d = editDistance(word, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/**
 * The candidate `word` was most likely meant to be, or undefined when none is near: at most a third of the
 * word's letters edited (at least one), case ignored (`keyprefix` means `keyPrefix`).
 */
export function likelyMeant(word: string, candidates: readonly string[]): string | undefined {
  const lower = word.toLowerCase();
  const best = closest(
    lower,
    candidates.map((c) => c.toLowerCase()),
  );
  if (best === undefined) return undefined;
  if (editDistance(lower, best) > Math.max(1, Math.floor(word.length / 3))) return undefined;
  return candidates.find((c) => c.toLowerCase() === best);
}

/** Optimal-string-alignment distance: insertions, deletions, substitutions and adjacent transpositions. */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    const row = rows[i] as number[];
    const above = rows[i - 1] as number[];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min((above[j] as number) + 1, (row[j - 1] as number) + 1, (above[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d = Math.min(d, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      }
      row[j] = d;
    }
  }
  return (rows[a.length] as number[])[b.length] as number;
}
