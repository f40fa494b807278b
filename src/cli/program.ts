import { readFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Command, CommanderError, Option } from 'commander';
import { type ConsumerSetup, openConsumer } from '../config/consumer.js';
import { loadConfig } from '../config/load.js';
import { consumerConfigSchema } from '../consumer/options.js';
import { ConfigError, errorMessage, InvalidInputError } from '../errors.js';
import { closest } from '../options/closest.js';
import { type ConfigOverride, configSource } from '../options/sources.js';
import { commandLine } from '../util/command-line.js';
import { BatchIds, type DedupEntry, dedupLines } from './dedup.js';
import { DuplicateLog } from './duplicates.js';
import { estimateLines } from './estimate.js';
import { ExitCode, failWith, importOrExit } from './exit-code.js';
import { compileId } from './id.js';
import { readBatches, STDIN } from './lines.js';
import { type MigrateFlags, runMigrate } from './migrate.js';
import { type CliConfig, cliConfigSchema, dedupDefaults, invalidPolicies } from './options.js';
import { Output } from './output.js';
import { emptyCounts, Progress } from './progress.js';
import { idFormats, type RecordsFlags, runRecords } from './records.js';
import { chooseStore, describeStore, knownSchemes } from './store-url.js';

export { ExitCode };

/** The `idem dedup` flags read as such; those that override a config key are read through OVERRIDES. */
type DedupFlags = { readonly [flag in 'store' | 'config' | 'expectedIds' | 'duplicates']?: string };

/** Runs the `idem` command line and resolves to the exit code. */
export async function run(argv: readonly string[]): Promise<number> {
  let code: number = ExitCode.ok;
  // Commander's own error output (the message, then the whole help) is replaced by one line: see usageLine.
  let failed: Command | undefined;
  const quiet = (command: Command) =>
    command.configureOutput({
      outputError: () => {
        failed = command;
      },
    });
  const program = new Command('idem')
    .description('Idempotent-consumer tools: drop lines whose id was already seen, resumably.')
    .version(packageVersion())
    .exitOverride();
  quiet(program);
  quiet(program.command('dedup'))
    .description('Write each NDJSON line whose id was not seen before (in this or an earlier run) to stdout.')
    .argument('[files...]', `NDJSON files, read in order; "${STDIN}" or none reads stdin`)
    .option('--id <paths>', 'dotted path of the id field; comma-separated paths form a composite id (a.b,c)')
    .option(
      '--ttl <duration>',
      'how long a seen id stays a duplicate, e.g. 24h, 7d (default: consumer.ttl, 24h)',
    )
    .option(
      '--store <dir|url>',
      `RocksDB directory of seen ids (default: ${dedupDefaults.storeDir}); "${dedupDefaults.memoryStore}": keep them in memory for this run only; a URL selects its store (${knownSchemes()})`,
    )
    .option('--config <file>', 'TOML config file (default: $IDEM_CONFIG); flags win over it')
    .addOption(
      new Option('--invalid <policy>', 'malformed lines and lines without id: stop, write them, or drop them')
        .choices(invalidPolicies)
        .default(undefined, dedupDefaults.invalid),
    )
    .option('--batch-size <lines>', `lines per store round trip (default: ${dedupDefaults.batchSize})`)
    .option(
      '--max-line-bytes <bytes>',
      `longest line, newline excluded; a longer one is an invalid line (default: ${dedupDefaults.maxLineBytes})`,
    )
    .option(
      '--expected-ids <ids>',
      'ids this run adds, to size the RocksDB key index up front (default: estimated from the input files)',
    )
    .option('--no-progress', 'no progress bar or progress lines (the summary is still printed)')
    .option(
      '--duplicates <file>',
      'append one NDJSON line per dropped line to <file>: {id, at: file:line, first: file:line or "earlier run"}',
    )
    .action(async (files: string[], flags: DedupFlags, command: Command) => {
      code = await runDedup(files, flags, command);
    });
  quiet(program.command('migrate'))
    .description(
      "Print the DDL of a SQL store's table, or create it with --apply (idempotent; see docs/postgres.md, docs/mysql.md).",
    )
    .option(
      '--store <url>',
      'the database: postgres://[user[:password]@]host[:port]/database (PGPASSWORD works too) or ' +
        'mysql://user[:password]@host[:port]/database',
    )
    .option('--table <name>', "table name, or schema.table (default: the store's default table)")
    .option('--apply', 'run the DDL instead of printing it')
    .action(async (flags: MigrateFlags) => {
      code = await runMigrate(flags, { out: process.stdout, err: process.stderr });
    });
  const storeHelp = `the store: a RocksDB directory or a URL (${knownSchemes()}); or name it in --config`;
  const idsHelp = 'a file of ids, one a line ("-" reads stdin); with or instead of ids as arguments';
  const idFormat = () =>
    new Option('--id-format <format>', 'how ids are written: text, or the bytes of a binary id (a Kafka key)')
      .choices(idFormats)
      .default('text');
  const replayEpoch = "the ids of this replay epoch (the consumer's replayEpoch; docs/operations.md)";
  /** A command on the store that `--store` or `--config` names. */
  const storeCommand = (name: string, description: string) =>
    quiet(program.command(name).description(description))
      .option('--store <dir|url>', storeHelp)
      .option('--config <file>', 'TOML config file naming the store (default: $IDEM_CONFIG)');
  /** `inspect` and `forget`: ids as arguments or in a file (`--ids`). */
  const idsCommand = (name: 'inspect' | 'forget', description: string, idsArgument: string) =>
    storeCommand(name, description)
      .argument('[ids...]', idsArgument)
      .option('--ids <file>', idsHelp)
      .addOption(idFormat())
      .option('--replay-epoch <epoch>', replayEpoch)
      .action(async (ids: string[], flags: RecordsFlags) => {
        code = await runRecords(name, ids, flags, { out: process.stdout, err: process.stderr });
      });
  idsCommand(
    'inspect',
    'Show what the store holds for each id: state, owner, lease, expiry, first seen, fingerprint (docs/operations.md).',
    'ids to look up',
  )
    .option('--json', 'one JSON object per id (NDJSON) instead of text')
    .option('--show-result', 'print the kept result itself (it can hold personal data)');
  idsCommand(
    'forget',
    'Remove ids from the store so their next copies are processed again (docs/operations.md).',
    'ids to remove',
  )
    .option('--force', 'remove in-flight claims too (their handlers may still be running)')
    .option('--json', 'one JSON object per id (NDJSON) instead of text');
  storeCommand(
    'stats',
    'Count the ids a store holds, by state, with the oldest and newest expiry and first-seen time (docs/operations.md).',
  )
    .option('--json', 'one JSON object instead of text')
    .action(async (flags: RecordsFlags) => {
      code = await runRecords('stats', [], flags, { out: process.stdout, err: process.stderr });
    });
  quiet(program.command('node'))
    .description('Run the Kafka→Kafka dedup node until SIGTERM/SIGINT (see docs/node.md).')
    .option('--config <file>', 'TOML config file (default: $IDEM_CONFIG)')
    .action(async (flags: { config?: string }) => {
      // Imported on demand, so `idem dedup` never loads kafkajs (nor pino, prom-client: optional dependencies).
      const { runNode } = await importOrExit(() => import('../node/main.js'), 'idem node');
      code = await runNode(flags.config ? { configPath: flags.config } : {});
      // kafkajs and store clients can leave timers behind; the node is done and its log flushed (as bin.ts).
      process.exit(code);
    });
  try {
    await program.parseAsync(argv);
  } catch (error) {
    if (!(error instanceof CommanderError)) throw error;
    if (error.exitCode === 0) return ExitCode.ok;
    if (failed !== undefined) process.stderr.write(`${usageLine(failed, error)}\n`);
    return ExitCode.usage;
  }
  return code;
}

/**
 * A command-line mistake in one line: what was wrong, the closest valid flag or command (always named, however
 * far), and where the full list is. `idem dedup: unknown option '--idd' (did you mean --id?); see idem dedup --help`.
 */
function usageLine(command: Command, error: CommanderError): string {
  const name = command.parent ? `idem ${command.name()}` : 'idem';
  const quoted = /'([^']*)'/.exec(error.message)?.[1] ?? '';
  let problem = error.message
    .replace(/^error: /, '')
    .replace(/\s*\(Did you mean [^)]*\)/i, '')
    .replace(/\s*\n\s*/g, ' ')
    .trim()
    .replace(/\.$/, '');
  if (error.code === 'commander.unknownOption') {
    const flags = command.options.flatMap((o) => (o.long ? [o.long] : [])).concat('--help');
    const wanted = quoted.split('=')[0] ?? quoted;
    problem += ` (did you mean ${closest(wanted, flags) ?? '--help'}?)`;
  } else if (error.code === 'commander.unknownCommand') {
    const names = command.commands.map((c) => c.name());
    problem += ` (did you mean ${closest(quoted, names)}?)`;
  }
  return `${name}: ${problem}; see ${name} --help`;
}

async function runDedup(files: string[], flags: DedupFlags, command: Command): Promise<number> {
  const stderr = process.stderr;
  let config: CliConfig;
  let storeNote = '';
  let inputs: string[];
  let totalBytes = 0;
  let duplicates: DuplicateLog | undefined;
  let idExpression: string;
  let setup: ConsumerSetup<DedupEntry>;
  const ids = new BatchIds();
  try {
    config = await loadConfig(cliConfigSchema, {
      ...(flags.config === undefined ? {} : { path: flags.config }),
      overrides: flagOverrides(command),
    });
    const expectedIds = expectedIdsFlag(flags.expectedIds);
    chooseStore(config, flags.store);
    storeNote = describeStore(config);
    warnIgnored(config);
    inputs = files.length === 0 ? [STDIN] : files;
    const sizes = await inputSizes(inputs);
    for (const input of sizes) totalBytes += input.bytes;
    await sizeKeyIndex(config, expectedIds, sizes);
    // Opened before any line is read: a path that cannot be written stops the run before it starts.
    if (flags.duplicates !== undefined) duplicates = DuplicateLog.open(flags.duplicates, inputs);
    if (config.consumer.id === undefined) {
      throw new ConfigError('consumer.id', 'required: pass --id <path> or set consumer.id in the config');
    }
    idExpression = config.consumer.id;
    compileId(idExpression); // the parse worker compiles it again; a bad expression is reported here
    // The mode is fixed: eager leases would strand ids claimed by a killed run (see docs/cli.md).
    setup = await openConsumer<DedupEntry>(config, {
      id: ids.id,
      // The effect is the output file, not a row in the store's database: no SQL transaction per line.
      consumer: {
        mode: 'lazy',
        skipDuplicate: true,
        // A line without id reaches the consumer only under `--invalid pass`, reported line by line already.
        nullId: 'forward',
        onWarning: (warning, code) => {
          if (code !== 'IDEM_NO_ID') stderr.write(`${commandLine('idem dedup', warning)}\n`);
        },
        storeFailure: 'fail',
        transaction: false,
        ...(duplicates === undefined ? {} : { onDuplicate: duplicates.hook }),
      },
      onWarning: (warning) => stderr.write(`${commandLine('idem dedup', warning)}\n`),
    });
  } catch (error) {
    const code = failWith('idem dedup', error, stderr);
    duplicates?.close();
    return code;
  }

  const progress = new Progress(config.dedup.progress && !inputs.includes(STDIN), totalBytes);
  const counts = emptyCounts();
  const abort = new AbortController();
  let signal: NodeJS.Signals | undefined;
  const onSignal = (received: NodeJS.Signals) => {
    if (signal !== undefined) process.exit(signalCode(received));
    signal = received;
    progress.log(`idem dedup: ${received}: finishing the current batch (send again to quit at once)`);
    abort.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let code: number = ExitCode.ok;
  let note: string | undefined;
  try {
    const end = await dedupLines({
      batches: readBatches(inputs, config.dedup.batchSize, {
        idExpression,
        maxLineBytes: config.dedup.maxLineBytes,
        signal: abort.signal,
      }),
      consumer: setup.consumer,
      ids,
      invalid: config.dedup.invalid,
      output: new Output(),
      ...(duplicates === undefined ? {} : { duplicates }),
      counts,
      onInvalid: (location, reason, passed) =>
        progress.log(
          `${new InvalidInputError(location, reason).message} (${passed ? 'passed through' : 'skipped'})`,
        ),
      onBatch: (c) => progress.update(c),
      stopRequested: () => signal !== undefined,
    });
    if (end.kind === 'invalid') {
      progress.log(new InvalidInputError(end.location, end.reason).message);
      note = 'stopped at an invalid line (--invalid error)';
      code = ExitCode.invalidInput;
    } else if (end.kind === 'output-closed') {
      note = 'output closed by its reader';
    }
    if (signal !== undefined) {
      note = `stopped by ${signal}`;
      code = signalCode(signal);
    }
  } catch (error) {
    progress.log(commandLine('idem dedup', errorMessage(error)));
    code = ExitCode.failure;
  } finally {
    progress.stop();
    try {
      await setup.repository.close();
    } catch (error) {
      stderr.write(`${commandLine('idem dedup', `closing the store: ${errorMessage(error)}`)}\n`);
      code = ExitCode.failure;
    }
    try {
      duplicates?.close();
    } catch (error) {
      stderr.write(`${commandLine('idem dedup', errorMessage(error))}\n`);
      code = ExitCode.failure;
    }
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  stderr.write(`${progress.summary(counts, [storeNote, note].filter(Boolean).join('; '))}\n`);
  return code;
}

/** The `idem dedup` flags that override a config key: flag, key, and the value the flag's text gives. */
const OVERRIDES: readonly [flag: string, key: string, value?: (text: string) => unknown][] = [
  ['id', 'consumer.id'],
  ['ttl', 'consumer.ttl'],
  ['invalid', 'dedup.invalid'],
  // Only digits become a number; anything else reaches the schema as given, so the error quotes it.
  ['batchSize', 'dedup.batchSize', (text) => (/^\s*\d+\s*$/.test(text) ? Number(text) : text)],
  ['maxLineBytes', 'dedup.maxLineBytes', Number],
  ['progress', 'dedup.progress'],
];

/** Only flags given on the command line override the config file. */
function flagOverrides(command: Command): ConfigOverride[] {
  return OVERRIDES.filter(([flag]) => command.getOptionValueSource(flag) === 'cli').map(
    ([flag, key, value]) => {
      const option = command.options.find((o) => o.attributeName() === flag) as Option;
      const given = command.getOptionValue(flag);
      return { key, value: value ? value(given as string) : given, source: option.long as string };
    },
  );
}

/** The `[consumer]` keys dedup honours; it fixes the others (mode, lease, policies: docs/cli.md). */
const DEDUP_CONSUMER_KEYS = ['id', 'ttl', 'failureMessage', 'encryption', 'eventTime', 'replayEpoch'];

/** Consumer keys that make no sense for dedup are ignored, but never silently. */
function warnIgnored(config: CliConfig): void {
  const info = configSource(config);
  if (!info) return;
  const consumer = info.fileData?.consumer;
  const given = [
    ...(consumer && typeof consumer === 'object' ? Object.keys(consumer) : []),
    ...info.env.flatMap((entry) => (entry.path[0] === 'consumer' ? [entry.path[1] as string] : [])),
  ];
  const ignored = (key: string) =>
    Object.hasOwn(consumerConfigSchema.shape, key) && !DEDUP_CONSUMER_KEYS.includes(key);
  const keys = [...new Set(given.filter(ignored))].map((k) => `consumer.${k}`).join(', ');
  if (keys !== '')
    process.stderr.write(
      `idem dedup: ignoring ${keys}: dedup always checks, writes, then marks (docs/cli.md)\n`,
    );
}

/** Each input with its size in bytes (0 for stdin); an unreadable file is a usage error naming it. */
async function inputSizes(inputs: readonly string[]): Promise<{ name: string; bytes: number }[]> {
  const sizes: { name: string; bytes: number }[] = [];
  for (const input of inputs) {
    try {
      sizes.push({ name: input, bytes: input === STDIN ? 0 : (await stat(input)).size });
    } catch (error) {
      const reason = (error as NodeJS.ErrnoException).code ?? String(error);
      throw new ConfigError('files', `cannot read ${input} (${reason})`);
    }
  }
  return sizes;
}

/** `--expected-ids`: a whole number of ids, or undefined when not given. */
function expectedIdsFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ids = /^\s*\d+\s*$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(ids)) {
    throw new ConfigError('repository.expectedIds', `must be a whole number of ids, got "${value}"`, {
      source: '--expected-ids',
    });
  }
  return ids;
}

/**
 * Presizes the RocksDB key index (`repository.expectedIds`) so it does not grow by rehashing during the run:
 * `--expected-ids` wins, then the config's own value, then an estimate of the file inputs' line count.
 */
async function sizeKeyIndex(
  config: CliConfig,
  flag: number | undefined,
  inputs: readonly { name: string; bytes: number }[],
): Promise<void> {
  const section = config.repository as Record<string, unknown> & { type: string };
  if (section.type !== 'rocksdb') {
    if (flag === undefined) return;
    throw new ConfigError(
      'repository.type',
      `sizes the RocksDB store's key index, but this run uses the ${section.type} store`,
      { label: '--expected-ids' },
    );
  }
  if (flag !== undefined) section.expectedIds = flag;
  else if (section.expectedIds === undefined) {
    const lines = await estimateLines(inputs);
    if (lines !== undefined) section.expectedIds = lines;
  }
}

function signalCode(signal: NodeJS.Signals): number {
  return signal === 'SIGINT' ? ExitCode.sigint : ExitCode.sigterm;
}

function packageVersion(): string {
  return String(JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version);
}
