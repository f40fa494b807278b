import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The repository root: where a source run starts. */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const HIDE = fileURLToPath(new URL('./hide-packages/register.mjs', import.meta.url));

/** The `idem` CLI and the `idem node` entry point, as TypeScript sources. */
export const SOURCE_CLI = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
export const SOURCE_NODE_BIN = fileURLToPath(new URL('../../src/node/bin.ts', import.meta.url));

/** What a finished child (the CLI, the node) printed, and how it ended. */
export interface ChildResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Collects a started child's output until it exits. */
export function finished(child: ChildProcess): Promise<ChildResult> {
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  child.stdout?.on('data', (d: Buffer) => stdout.push(d));
  child.stderr?.on('data', (d: Buffer) => stderr.push(d));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) =>
      resolve({
        code,
        signal,
        stdout: Buffer.concat(stdout).toString('utf8'),
        stderr: Buffer.concat(stderr).toString('utf8'),
      }),
    );
  });
}

/**
 * Runs a TypeScript entry point through tsx in a child process, with no config file from the environment, and
 * collects its output. `hidden` names packages the child cannot import (test/helpers/hide-packages): how a test
 * sees what a user without an optional package sees. (The built CLI, for tests that run it per case, is
 * test/cli/run-cli.ts.)
 */
export function runSource(
  script: string,
  args: readonly string[],
  options: { readonly env?: Record<string, string>; readonly hidden?: readonly string[] } = {},
): Promise<ChildResult> {
  const hide = options.hidden === undefined ? [] : ['--import', HIDE];
  const child = spawn(process.execPath, ['--import', 'tsx', ...hide, script, ...args], {
    cwd: ROOT,
    env: {
      ...process.env,
      IDEM_CONFIG: '',
      ...(options.hidden === undefined ? {} : { IDEM_TEST_HIDE_PACKAGES: options.hidden.join(',') }),
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return finished(child);
}
