/**
 * The ledger of one chaos scenario: what happened to each message, checked against the guarantee the scenario's
 * configuration gives. Every scenario ends in one {@link Ledger} and one verdict line:
 *
 *   PASS pause-long/redis: 600 ids, 1,800 deliveries; 0 lost, 1 applied twice (allowed ≤ 3: stale owners), 0 stuck; 41.2 s
 */

/** What a scenario found, per message, summed. */
export interface Ledger {
  /** `<scenario>/<store or client>`, e.g. `pause-long/redis`. */
  readonly name: string;
  /** Distinct message ids the input held. */
  readonly ids: number;
  /** Deliveries in all (every worker's copy, every redelivery): how often a consumer was handed an id. */
  readonly deliveries: number;
  /** Effects recorded in all (ledger rows, output records). */
  readonly effects: number;
  /** Ids with no effect at all. */
  readonly lost: number;
  /** Ids whose effect was applied more than once. */
  readonly duplicated: number;
  /** Effects beyond one per id. */
  readonly extraEffects: number;
  /** The most {@link extraEffects} the configured guarantee allows here. */
  readonly allowedExtra: number;
  /** Why that many are allowed (`stale owners`, `exactly-once`, …). */
  readonly allowance: string;
  /** Ids whose store record is not confirmed at the end (an in-flight claim, or none); -1: not checked. */
  readonly stuck: number;
  /** The chaos applied (`3 pauses of 7.5 s`, `2 restarts`, …). */
  readonly chaos: string;
  readonly elapsedMs: number;
  /** A few example ids of what went wrong, for the report. */
  readonly examples: readonly string[];
}

/** Counts effects per id: `effects` lists the id of every effect applied, in any order. */
export function countEffects(
  ids: Iterable<string>,
  effects: Iterable<string>,
): Pick<Ledger, 'ids' | 'effects' | 'lost' | 'duplicated' | 'extraEffects' | 'examples'> {
  const perId = new Map<string, number>();
  for (const id of ids) perId.set(id, 0);
  let total = 0;
  const strangers: string[] = [];
  for (const id of effects) {
    total++;
    const n = perId.get(id);
    if (n === undefined) strangers.push(id);
    else perId.set(id, n + 1);
  }
  if (strangers.length > 0) {
    throw new Error(
      `the ledger holds effects of ids that were never sent: ${strangers.slice(0, 5).join(', ')}`,
    );
  }
  let lost = 0;
  let duplicated = 0;
  let extra = 0;
  const examples: string[] = [];
  for (const [id, n] of perId) {
    if (n === 0) {
      lost++;
      if (examples.length < 5) examples.push(`${id}: lost`);
    } else if (n > 1) {
      duplicated++;
      extra += n - 1;
      if (examples.length < 5) examples.push(`${id}: ${n}×`);
    }
  }
  return { ids: perId.size, effects: total, lost, duplicated, extraEffects: extra, examples };
}

/** Whether the ledger holds what the guarantee promises: nothing lost, nothing stuck, duplicates within bounds. */
export function passed(ledger: Ledger): boolean {
  return ledger.lost === 0 && ledger.stuck <= 0 && ledger.extraEffects <= ledger.allowedExtra;
}

const n = (value: number) => value.toLocaleString('en-US');

/** The one-line verdict of a scenario. */
export function verdict(ledger: Ledger): string {
  const dup =
    ledger.duplicated === 0
      ? '0 applied twice'
      : `${n(ledger.duplicated)} applied more than once (${n(ledger.extraEffects)} extra)`;
  const stuck = ledger.stuck < 0 ? 'stuck not checked' : `${n(ledger.stuck)} stuck`;
  return (
    `${passed(ledger) ? 'PASS' : 'FAIL'} ${ledger.name}: ${n(ledger.ids)} ids, ${n(ledger.deliveries)} deliveries, ` +
    `${ledger.chaos}; ${n(ledger.lost)} lost, ${dup} (allowed ≤ ${n(ledger.allowedExtra)}: ${ledger.allowance}), ` +
    `${stuck}; ${(ledger.elapsedMs / 1000).toFixed(1)} s`
  );
}

/** The ledger as a few indented lines (the full record under the verdict). */
export function ledgerLines(ledger: Ledger): string[] {
  const lines = [
    `  ids ${n(ledger.ids)}, deliveries ${n(ledger.deliveries)}, effects ${n(ledger.effects)}`,
    `  lost ${n(ledger.lost)}, duplicated ids ${n(ledger.duplicated)}, extra effects ${n(ledger.extraEffects)} ` +
      `(allowed ${n(ledger.allowedExtra)}), stuck in-progress ${ledger.stuck < 0 ? '-' : n(ledger.stuck)}`,
  ];
  if (ledger.examples.length > 0) lines.push(`  e.g. ${ledger.examples.join(', ')}`);
  return lines;
}
