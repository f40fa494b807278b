import { ConfigError, errorMessage, InvalidIdError } from '../errors.js';
import { commandLine } from '../util/command-line.js';
import { asMissingDependency } from '../util/optional-module.js';

/** Exit codes of `idem`, documented in docs/cli.md. */
export const ExitCode = {
  ok: 0,
  /** `--invalid error` stopped at a malformed line or a line without id. */
  invalidInput: 1,
  /** Bad flags or config. */
  usage: 2,
  /** The store or an input/output file failed. */
  failure: 3,
  sigint: 130,
  sigterm: 143,
} as const;

/** Where a command writes: its output to `out`, what went wrong and summaries to `err`. */
export type CliStreams = Readonly<Record<'out' | 'err', { write(text: string): unknown }>>;

/** Writes `error` as one `<command>: …` line; answers `usage` for a bad flag, setting or id, else `failure`. */
export function failWith(command: string, error: unknown, err: CliStreams['err']): number {
  err.write(`${commandLine(command, errorMessage(error))}\n`);
  return error instanceof ConfigError || error instanceof InvalidIdError ? ExitCode.usage : ExitCode.failure;
}

/** Imports a CLI module that needs optional packages; without them, says so and exits with `failure`. */
export async function importOrExit<T>(load: () => Promise<T>, feature: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const missing = asMissingDependency(error, { feature });
    if (missing === undefined) throw error;
    process.stderr.write(`${missing.message} (an install with --omit=optional leaves it out)\n`);
    process.exit(ExitCode.failure);
  }
}
