import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The repository root: where a source run starts. */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const HIDE = fileURLToPath(new URL('./hide-packages/register.mjs', import.meta.url));

/** The `idem` CLI and the `idem node` entry point, as TypeScript sources. */
export const SOURCE_CLI = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
export const SOURCE_NODE_BIN = fileURLToPath(new URL('../../src/node/bin.ts', import.meta.url));

/** What a finished source run printed. */
export interface SourceRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
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
): Promise<SourceRun> {
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
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => {
    stdout += text;
  });
  child.stderr.setEncoding('utf8').on('data', (text: string) => {
    stderr += text;
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}
