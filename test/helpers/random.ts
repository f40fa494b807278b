/** Deterministic pseudo-random numbers (mulberry32), so every run builds the same input and a failure replays. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A seed from a text (e.g. a worker's owner token), so a run can be replayed from that text. */
export function seedOf(text: string): number {
  let seed = 0;
  for (const ch of text) seed = (Math.imul(seed, 31) + (ch.codePointAt(0) ?? 0)) | 0;
  return seed;
}

/** A deterministic Fisher–Yates shuffle. */
export function shuffle<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}
