/**
 * `npm run chaos`: the chaos rig against real servers (docs/reliability.md). Every scenario ends with its ledger
 * and a one-line verdict; the process exits 1 when any scenario fails.
 *
 *   npm run chaos                                   # the full run (several minutes)
 *   npm run chaos -- --short                        # the sizes the test suite uses
 *   npm run chaos -- --only 'pause|gc' --ids 5000   # scenarios whose name matches; any size as a flag
 *   npm run chaos -- --clients kafkajs              # the node scenarios on one Kafka client (default both)
 *   npm run chaos -- --self-check --only never --scenario-timeout-ms 2000   # a scenario that never finishes
 *
 * A scenario still running after `--scenario-timeout-ms` (sizes.ts) fails as one that never finishes: its
 * cleanups run (its servers and nodes are stopped), the run goes on, and the process exits 1 naming it.
 * `--self-check` adds `self-check/never-finishes`, which waits for a condition that can never be met, to show it.
 *
 * Sizes: see ./sizes.ts (`--ids`, `--workers`, `--lease-ms`, `--long-pauses`, `--gc-cycles`, `--restarts`,
 * `--network-rounds`, `--outage-ms`, `--node-records`, ... or IDEM_CHAOS_<NAME>). The store scenarios run on
 * private servers of their own; the node's freeze scenario uses the Kafka broker at KAFKA_BROKERS (random
 * topics and groups), its broker restart a private broker.
 */
import { loadavg } from 'node:os';
import { type KafkaClientName, kafkaClientNames } from '../../src/kafka/port/names.js';
import { waitFor } from '../helpers/kafka.js';
import { type Ledger, ledgerLines, passed, verdict } from './ledger.js';
import { brokerRestart, type NodeGuarantee, nodeFreeze } from './node-scenarios.js';
import { Scope } from './scope.js';
import { type ChaosSizes, chaosSizes, FULL, SHORT } from './sizes.js';
import { runStoreChaos, STORE_SCENARIOS, STORES } from './store-scenarios.js';

interface Job {
  readonly name: string;
  /** Runs the scenario; what it starts registers its cleanup in `scope` (closed when the job ends or times out). */
  run(log: (line: string) => void, scope: Scope): Promise<Ledger>;
}

function parseArgs(argv: readonly string[]) {
  const flags = new Map<string, string>();
  const switches = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (!arg.startsWith('--')) throw new Error(`${arg}: expected a --flag`);
    if (arg === '--short' || arg === '--help' || arg === '--self-check') switches.add(arg);
    else {
      const value = argv[++i];
      if (value === undefined) throw new Error(`${arg}: needs a value`);
      flags.set(arg, value);
    }
  }
  return { flags, switches };
}

function jobs(sizes: ChaosSizes, clients: readonly KafkaClientName[], selfCheck: boolean): Job[] {
  const list: Job[] = [];
  if (selfCheck) {
    list.push({
      name: 'self-check/never-finishes',
      run: async (log, scope) => {
        scope.after(() => log('self-check/never-finishes: cleanup ran'));
        await waitFor(() => false, { timeoutMs: 2 ** 31 - 1, intervalMs: 500, what: 'what never happens' });
        throw new Error('unreachable');
      },
    });
  }
  for (const scenario of STORE_SCENARIOS) {
    for (const store of STORES) {
      list.push({
        name: `${scenario}/${store}`,
        run: async (log) => (await runStoreChaos(scenario, store, sizes, log)).ledger,
      });
    }
  }
  const inScope = (name: string, body: (scope: Scope) => Promise<Ledger>): Job => ({
    name,
    run: (_, s) => body(s),
  });
  for (const client of clients) {
    list.push(
      inScope(`restart/kafka-broker/${client}`, (s) => brokerRestart(s.context, client, sizes, s.log)),
    );
    for (const guarantee of ['at-least-once', 'exactly-once'] as NodeGuarantee[]) {
      list.push(
        inScope(`node-freeze/${guarantee}/${client}`, (s) =>
          nodeFreeze(s.context, client, guarantee, sizes, s.log),
        ),
      );
    }
  }
  return list;
}

/**
 * Runs `job` in a scope of its own, closed when it ends; past `sizes.scenarioTimeoutMs` it fails as one that never
 * finishes, and its scope is closed then (stopping what it started, which may end the job's body too).
 */
async function runBounded(job: Job, log: (line: string) => void, sizes: ChaosSizes): Promise<Ledger> {
  const scope = new Scope(log);
  const limitS = sizes.scenarioTimeoutMs / 1000;
  let timer: NodeJS.Timeout | undefined;
  const running = job.run(log, scope);
  running.catch(() => undefined);
  try {
    return await Promise.race([
      running,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`${job.name} did not finish within ${limitS} s (--scenario-timeout-ms)`)),
          sizes.scenarioTimeoutMs,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
    // A cleanup that hangs must not hang the run either.
    const closing = scope.close().then(() => true);
    closing.catch(() => undefined);
    const closed = await Promise.race([closing, sleep(sizes.scenarioTimeoutMs / 4, false)]);
    if (!closed) log(`${job.name}: its cleanup did not finish within ${limitS / 4} s; going on`);
  }
}

function sleep<T>(ms: number, value: T): Promise<T> {
  return new Promise((resolve) => setTimeout(resolve, ms, value).unref());
}

async function main(): Promise<number> {
  const { flags, switches } = parseArgs(process.argv.slice(2));
  if (switches.has('--help')) {
    console.log(
      'usage: npm run chaos -- [--short] [--only REGEX] [--clients kafkajs,platformatic] [--parallel N] [--<size> N]',
    );
    return 0;
  }
  const sizes = chaosSizes(switches.has('--short') ? SHORT : FULL, process.env, flags);
  const clients = (flags.get('--clients') ?? kafkaClientNames.join(',')).split(',').map((c) => {
    if (!(kafkaClientNames as readonly string[]).includes(c))
      throw new Error(`--clients: unknown client ${c}`);
    return c as KafkaClientName;
  });
  const only = new RegExp(flags.get('--only') ?? '.');
  // Store runs of one scenario side by side (each on its own servers); the node runs one at a time.
  const parallel = Number(flags.get('--parallel') ?? 3);
  const selected = jobs(sizes, clients, switches.has('--self-check')).filter((job) => only.test(job.name));
  const load = () =>
    loadavg()
      .map((l) => l.toFixed(1))
      .join(' ');
  const t0 = Date.now();
  const stamp = () => `[${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s]`;
  console.log(`chaos: ${selected.length} scenarios, sizes ${JSON.stringify(sizes)}; load average ${load()}`);
  const ledgers: Ledger[] = [];
  const failures: string[] = [];
  const queue = [...selected];
  const storeJob = (job: Job) => !job.name.includes('kafka') && !job.name.startsWith('node-');
  const worker = async () => {
    for (let job = queue.shift(); job; job = queue.shift()) {
      try {
        const ledger = await runBounded(job, (line) => console.log(`${stamp()}   ${line}`), sizes);
        ledgers.push(ledger);
        console.log(`${stamp()} ${verdict(ledger)}`);
        for (const line of ledgerLines(ledger)) console.log(line);
      } catch (error) {
        failures.push(`${job.name}: ${error instanceof Error ? error.message.split('\n')[0] : error}`);
        console.log(
          `${stamp()} FAIL ${job.name}: ${error instanceof Error ? (error.stack ?? error.message) : error}`,
        );
      }
    }
  };
  // The store jobs first, `parallel` at a time; then the node jobs one by one.
  const stores = queue.filter(storeJob);
  const nodes = queue.filter((job) => !storeJob(job));
  queue.splice(0, queue.length, ...stores);
  await Promise.all(Array.from({ length: Math.max(1, parallel) }, worker));
  queue.push(...nodes);
  await worker();

  console.log(`\nchaos: done in ${((Date.now() - t0) / 1000).toFixed(0)} s; load average ${load()}`);
  for (const ledger of ledgers) console.log(verdict(ledger));
  for (const failure of failures) console.log(`FAIL ${failure} (the scenario did not complete, see above)`);
  const failed = ledgers.filter((l) => !passed(l)).length + failures.length;
  console.log(`${ledgers.length + failures.length - failed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`chaos: ${error instanceof Error ? error.message : error}`);
    process.exit(2);
  },
);
