import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { prng } from '../helpers/random.js';
import { type ChildResult, finished } from '../helpers/source-run.js';
import { builtCheckout } from '../package/pack.js';

export { finished, prng };

/** The repository root: where the CLI runs unless a test says otherwise. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The CLI's entry point in this source state's build, built on first use and shared by every test file (see
 * builtCheckout): a plain `node` start, so a test can afford a CLI run per case.
 */
export function cliMain(): string {
  return join(builtCheckout(), 'dist/cli/main.js');
}

/** What a finished CLI run produced. */
export type CliResult = ChildResult;

/** Options of {@link startCli}. */
export interface CliOptions {
  /** Text written to the child's stdin (then closed); without it stdin is empty. */
  readonly input?: string;
  /** Leave stdin open for the test to write to (and end). */
  readonly keepStdinOpen?: boolean;
  /** A file descriptor to use as the child's stdin instead of a pipe (then `input` is not used). */
  readonly stdinFd?: number;
  /** A file descriptor to use as the child's stdout instead of a pipe. */
  readonly stdoutFd?: number;
  readonly env?: Record<string, string>;
  readonly cwd?: string;
  /** Run under leftovers.mjs, which fails the run when a timer or socket outlives its exit. */
  readonly leftovers?: boolean;
  /** A bash command run first in the CLI's own shell (e.g. `ulimit -f 50`). */
  readonly shell?: string;
  /** The entry point to run instead of the build's (e.g. `bin/idem.js`). */
  readonly main?: string;
}

const LEFTOVERS = fileURLToPath(new URL('./leftovers.mjs', import.meta.url));

/** Starts the real CLI (this source state's build) as a child process. */
export function startCli(args: readonly string[], options: CliOptions = {}): ChildProcess {
  const argv = [...(options.leftovers ? [LEFTOVERS] : []), options.main ?? cliMain(), ...args];
  const [file, fileArgs] =
    options.shell === undefined
      ? [process.execPath, argv]
      : ['bash', ['-c', `${options.shell} && exec "$@"`, 'bash', process.execPath, ...argv]];
  const child = spawn(file, fileArgs, {
    cwd: options.cwd ?? ROOT,
    env: { ...process.env, IDEM_CONFIG: '', ...options.env },
    stdio: [options.stdinFd ?? 'pipe', options.stdoutFd ?? 'pipe', 'pipe'],
  });
  if (!options.keepStdinOpen) child.stdin?.end(options.input ?? '');
  return child;
}

/** Runs the CLI to completion. */
export function runCli(args: readonly string[], options: CliOptions = {}): Promise<CliResult> {
  return finished(startCli(args, options));
}

/**
 * NDJSON with `lines` lines, about `duplicateShare` of them repeating an earlier id. Returns the text and the
 * number of distinct ids.
 */
export function ndjson(lines: number, duplicateShare: number, seed = 1): { text: string; distinct: number } {
  const random = prng(seed);
  const out: string[] = [];
  let distinct = 0;
  for (let i = 0; i < lines; i++) {
    const repeat = distinct > 0 && random() < duplicateShare;
    const id = repeat ? Math.floor(random() * distinct) : distinct++;
    out.push(JSON.stringify({ id: `e-${id}`, n: i, payload: 'x'.repeat(20 + (i % 7)) }));
  }
  return { text: `${out.join('\n')}\n`, distinct };
}

/** The `id` of each NDJSON line of `text`. */
export function idsOf(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => (JSON.parse(line) as { id: string }).id);
}

/**
 * The words of the first `idem …` command quoted in backticks in `text` (an error's hint), as a POSIX shell
 * would split them (single quotes only: what the hints use), without the leading `idem`: ready for runCli.
 */
export function pastedCommand(text: string): string[] {
  const command = /`idem ([^`]*)`/.exec(text)?.[1];
  if (command === undefined) throw new Error(`no \`idem …\` command in: ${text}`);
  const words: string[] = [];
  for (const match of command.matchAll(/'([^']*)'|(\S+)/g)) words.push(match[1] ?? (match[2] as string));
  return words;
}
