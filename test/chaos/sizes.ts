/**
 * Sizes and durations of the chaos rig: `short` (the test suite's run, well under 2 minutes in all) or `full`
 * (`npm run chaos`, several minutes). Each is overridden by an environment variable `IDEM_CHAOS_<NAME>` or, for
 * `npm run chaos`, a flag `--<name> N` (e.g. `--ids 5000`, `--long-pauses 5`).
 */
export interface ChaosSizes {
  /** Distinct ids per store run (each delivered to every worker). */
  readonly ids: number;
  /** Worker processes per store run. */
  readonly workers: number;
  /** The consumers' lease (scenarios 1, 3, 4); a long pause is 2.5 of it. */
  readonly leaseMs: number;
  /** The lease of the GC-pause scenario, whose pauses are 10-25 % of it. */
  readonly gcLeaseMs: number;
  /** How long each handler works before its effect. */
  readonly handlerMs: number;
  /** Long SIGSTOPs of one worker (scenario 1). */
  readonly longPauses: number;
  /** Short SIGSTOPs per worker at most (scenario 2). */
  readonly gcCycles: number;
  /** Store server restarts (scenario 3). */
  readonly restarts: number;
  /** Rounds of delay, reset, freeze and refusal (scenario 4). */
  readonly networkRounds: number;
  /** How long a server stays down, a freeze or a refusal lasts. */
  readonly outageMs: number;
  /** Records of the dedup-node scenarios (5, and 3's broker restart). */
  readonly nodeRecords: number;
  /** Longest a store run may take. */
  readonly runTimeoutMs: number;
  /**
   * Longest a whole scenario may take in `npm run chaos`, setup and cleanup included: past it the scenario fails
   * as one that never finishes, and the run goes on (a guard against a hang, far above any scenario's time).
   */
  readonly scenarioTimeoutMs: number;
}

export const SHORT: ChaosSizes = {
  ids: 150,
  workers: 2,
  leaseMs: 1_500,
  gcLeaseMs: 3_000,
  handlerMs: 25,
  longPauses: 1,
  gcCycles: 4,
  restarts: 1,
  networkRounds: 1,
  outageMs: 700,
  nodeRecords: 6_000,
  runTimeoutMs: 90_000,
  scenarioTimeoutMs: 600_000,
};

export const FULL: ChaosSizes = {
  ids: 1_500,
  workers: 3,
  leaseMs: 3_000,
  gcLeaseMs: 3_000,
  handlerMs: 25,
  longPauses: 3,
  gcCycles: 15,
  restarts: 3,
  networkRounds: 2,
  outageMs: 1_500,
  nodeRecords: 30_000,
  runTimeoutMs: 600_000,
  scenarioTimeoutMs: 1_200_000,
};

const VARIABLES: Record<keyof ChaosSizes, string> = {
  ids: 'IDS',
  workers: 'WORKERS',
  leaseMs: 'LEASE_MS',
  gcLeaseMs: 'GC_LEASE_MS',
  handlerMs: 'HANDLER_MS',
  longPauses: 'LONG_PAUSES',
  gcCycles: 'GC_CYCLES',
  restarts: 'RESTARTS',
  networkRounds: 'NETWORK_ROUNDS',
  outageMs: 'OUTAGE_MS',
  nodeRecords: 'NODE_RECORDS',
  runTimeoutMs: 'RUN_TIMEOUT_MS',
  scenarioTimeoutMs: 'SCENARIO_TIMEOUT_MS',
};

/** `--long-pauses` → `longPauses`, the flag names `npm run chaos` takes. */
export function flagName(key: keyof ChaosSizes): string {
  return VARIABLES[key].toLowerCase().replaceAll('_', '-');
}

/** `base` with every `IDEM_CHAOS_<NAME>` set in `env` and every `--<name> N` in `flags` applied (flags win). */
export function chaosSizes(
  base: ChaosSizes,
  env: NodeJS.ProcessEnv = process.env,
  flags: ReadonlyMap<string, string> = new Map(),
): ChaosSizes {
  const sizes: Record<string, number> = { ...base };
  for (const key of Object.keys(VARIABLES) as (keyof ChaosSizes)[]) {
    const variable = `IDEM_CHAOS_${VARIABLES[key]}`;
    const flag = `--${flagName(key)}`;
    const raw = flags.get(flag) ?? env[variable];
    if (raw === undefined || raw === '') continue;
    const value = Number(raw.replaceAll('_', ''));
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new Error(`${flags.has(flag) ? flag : variable}=${raw}: expected a whole number ≥ 1`);
    }
    sizes[key] = value;
  }
  return sizes as unknown as ChaosSizes;
}
