/**
 * Runs a bench script's child mode under `valgrind --tool=cachegrind`: instruction counts the machine's load does
 * not move. Shared by bench/http-instructions.ts and bench/postgres-inbox-instructions.ts.
 */
import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * `node [flags] script ...args` under cachegrind (the parent's `--import tsx` kept): the instructions it counted
 * and what it printed. `flags` adds Node flags to the fixed ones.
 */
export async function cachegrind(
  script: string,
  args: readonly string[],
  label: string,
  flags: readonly string[] = [],
): Promise<{ instructions: number; stdout: string }> {
  const out = join(tmpdir(), `cachegrind-${process.pid}-${label}.out`);
  const { stdout } = await promisify(execFile)(
    'valgrind',
    [
      '--tool=cachegrind',
      '--cache-sim=no',
      `--cachegrind-out-file=${out}`,
      process.execPath,
      // No compiler or GC threads, fixed seeds: what would move the counts from run to run.
      '--single-threaded',
      '--hash-seed=1',
      '--random-seed=1',
      ...flags,
      ...process.execArgv,
      script,
      ...args,
    ],
    { maxBuffer: 64 << 20 },
  );
  const summary = /^summary:\s+(\d+)/m.exec(readFileSync(out, 'utf8'));
  rmSync(out, { force: true });
  if (!summary) throw new Error(`no cachegrind summary for ${label}`);
  return { instructions: Number(summary[1]), stdout };
}
