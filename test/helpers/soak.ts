/**
 * Sizes of the crash, outage and soak tests. `npm test` (and CI) runs them at a size that still shows the property
 * each test was written for; `npm run test:soak` (IDEM_SOAK=1) runs them at the soak size, which is what CI ran
 * before the suite went concurrent, or larger. One variable overrides one size: `IDEM_<NAME>=N`.
 *
 *   const KILLS = soakSize('NODE_EOS_KILLS', { ci: 6, soak: 20 });
 */
export function soakSize(name: string, sizes: { readonly ci: number; readonly soak: number }): number {
  const variable = `IDEM_${name}`;
  const raw = process.env[variable];
  if (raw !== undefined && raw !== '') {
    const value = Number(raw.replaceAll('_', ''));
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new Error(`${variable}=${raw}: expected a whole number ≥ 1`);
    }
    return value;
  }
  return soaking() ? sizes.soak : sizes.ci;
}

/** True under `npm run test:soak` (IDEM_SOAK=1). */
export function soaking(): boolean {
  return /^(1|true|yes)$/i.test(process.env.IDEM_SOAK ?? '');
}
