/**
 * A Kafka broker of the test's own (single-node KRaft, on other ports, in a temporary data directory) for tests
 * that stop the broker: stopping the shared one would break every other Kafka test running on the box. It runs
 * the jars the test stack resolved (`.stack/kafka/lib` of this checkout, or of the checkout whose node_modules
 * this one uses, or IDEM_STACK_DIR), and fetches them itself when none has them.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';
import { createTopicsAndWait, onCleanup, randomName, waitFor } from '../helpers/kafka.js';
import { portFree, sparePort } from '../helpers/redis-server.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Where the stack keeps its jars: the dirs tried, in order (IDEM_STACK_DIR, this checkout, node_modules' owner). */
function stackDirs(): string[] {
  return [
    process.env.IDEM_STACK_DIR,
    join(ROOT, '.stack'),
    join(dirname(realpathSync(join(ROOT, 'node_modules'))), '.stack'),
  ].filter((dir): dir is string => dir !== undefined && dir !== '');
}

function foundKafkaLib(dirs: readonly string[]): string | undefined {
  for (const dir of dirs) if (existsSync(join(dir, 'kafka', 'lib'))) return join(dir, 'kafka', 'lib');
  return undefined;
}

/**
 * The Kafka jars, fetched when no stack dir has them: on a machine where a broker already answers at
 * KAFKA_BROKERS, the stack reuses it and never fetches them (issue 20). `scripts/stack/jars.sh kafka` resolves
 * them into the first of `dirs` (IDEM_STACK_DIR, else this checkout's .stack), one fetch at a time across
 * parallel test files.
 */
export async function kafkaLib(dirs: readonly string[] = stackDirs()): Promise<string> {
  const found = foundKafkaLib(dirs);
  if (found !== undefined) return found;
  const target = dirs[0] ?? join(ROOT, '.stack');
  const command = `IDEM_STACK_DIR=${target} bash ${join(ROOT, 'scripts/stack/jars.sh')} kafka`;
  const child = spawn('bash', [join(ROOT, 'scripts/stack/jars.sh'), 'kafka'], {
    env: { ...process.env, IDEM_STACK_DIR: target },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const lib = foundKafkaLib(dirs);
  if (code !== 0 || lib === undefined) {
    throw new Error(
      `no Kafka jars in .stack/kafka/lib, and fetching them failed (\`${command}\` exited ${code}):\n${stderr.trim()}`,
    );
  }
  return lib;
}

/** The private broker: its address, and stop/start keeping its data. */
export interface PrivateBroker {
  readonly brokers: readonly string[];
  /** Stops the broker process (SIGTERM, waits for the exit). */
  stop(): Promise<void>;
  /** Starts it again on the same data and waits until it answers. */
  start(): Promise<void>;
  /** Whether the broker process is up (started and not stopped). */
  readonly running: boolean;
}

/** Starts a private broker on `port` (controller on `port + 1`); it is killed and its data removed after the test. */
export async function startPrivateBroker(t: TestContext, port?: number): Promise<PrivateBroker> {
  // Two consecutive free ports (the broker's and its controller's, +1) unless the test names them: files (and one
  // file's runs on the two Kafka clients) start private brokers side by side.
  port ??= await sparePortPair();
  const lib = await kafkaLib();
  const dir = await mkdtemp(join(tmpdir(), 'idem-private-kafka-'));
  const data = join(dir, 'data');
  const template = await readFile(join(ROOT, 'scripts/stack/kafka/server.properties.in'), 'utf8');
  const properties = template
    .replaceAll('@HOST@', '127.0.0.1')
    .replaceAll('@PORT@', String(port))
    .replaceAll('@CONTROLLER_PORT@', String(port + 1))
    .replaceAll('@DATA@', data);
  await writeFile(join(dir, 'server.properties'), properties);
  const java = (main: string, ...args: string[]) =>
    spawn(
      'java',
      [
        '-Xms128m',
        '-Xmx512m',
        '-XX:+UseG1GC',
        `-Dlog4j2.configurationFile=${join(ROOT, 'scripts/stack/kafka/log4j2.xml')}`,
        // The stack's logging config writes kafka.log into this directory.
        `-Dkafka.logs.dir=${dir}`,
        '-cp',
        `${lib}/*`,
        main,
        ...args,
      ],
      { stdio: 'ignore' },
    );
  const exited = (child: ChildProcess) =>
    new Promise<number | null>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
      else child.once('exit', (code) => resolve(code));
    });

  const clusterId = 'idemPrivateKafka0000A';
  const format = java(
    'kafka.tools.StorageTool',
    'format',
    '-t',
    clusterId,
    '-c',
    join(dir, 'server.properties'),
  );
  if ((await exited(format)) !== 0) throw new Error(`kafka storage format failed (${dir})`);

  let server: ChildProcess | undefined;
  const brokers = [`127.0.0.1:${port}`];
  const start = async () => {
    const started = java('kafka.Kafka', join(dir, 'server.properties'));
    server = started;
    const kafka = new Kafka({ clientId: 'idem-private-probe', brokers, logLevel: logLevel.NOTHING });
    await waitFor(
      async () => {
        // A broker that exited (a port taken, say) never answers: say so now, not after the whole wait.
        if (started.exitCode !== null || started.signalCode !== null) {
          throw new Error(
            `the private Kafka broker on ${brokers[0]} exited (${started.exitCode ?? started.signalCode}) ` +
              `while starting; its log: ${join(dir, 'kafka.log')}`,
          );
        }
        const admin = kafka.admin({ retry: { retries: 0 } });
        try {
          await admin.connect();
          await admin.describeCluster();
          return true;
        } catch {
          return false;
        } finally {
          await admin.disconnect().catch(() => undefined);
        }
      },
      { timeoutMs: 180_000, intervalMs: 500, what: `the private Kafka broker on ${brokers[0]}` },
    );
  };
  const stop = async () => {
    const s = server;
    server = undefined;
    if (!s || s.exitCode !== null) return;
    s.kill('SIGTERM');
    await exited(s);
  };
  onCleanup(t, async () => {
    if (server && server.exitCode === null) {
      server.kill('SIGKILL');
      await exited(server);
    }
    await rm(dir, { recursive: true, force: true });
  });
  await start();
  return {
    brokers,
    stop,
    start,
    get running() {
      return server !== undefined && server.exitCode === null;
    },
  };
}

/** A loopback port `p` with `p + 1` free too, at the time of asking. */
async function sparePortPair(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await sparePort();
    if (await portFree(port + 1)) return port;
  }
  throw new Error('no two consecutive free loopback ports found for a private Kafka broker');
}

/** A private broker with a test's input (3 partitions), output (3) and DLQ (1) topics, named `prefix-…`. */
export async function privateBrokerTestbed(t: TestContext, prefix: string, port?: number) {
  const broker = await startPrivateBroker(t, port);
  const kafka = new Kafka({
    clientId: 'idem-test',
    brokers: [...broker.brokers],
    logLevel: logLevel.NOTHING,
    retry: { retries: 10, initialRetryTime: 200 },
  });
  const admin = kafka.admin();
  await admin.connect();
  onCleanup(t, () => admin.disconnect());
  const [topic, output, dlq, groupId] = ['in', 'out', 'dlq', 'group'].map((p) =>
    randomName(`${prefix}-${p}`),
  ) as [string, string, string, string];
  await createTopicsAndWait(admin, [
    { topic, numPartitions: 3 },
    { topic: output, numPartitions: 3 },
    { topic: dlq, numPartitions: 1 },
  ]);
  return { broker, kafka, admin, topic, output, dlq, groupId };
}
