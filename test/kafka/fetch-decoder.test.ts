/*
 * The changelog reader's Fetch v11 decoder against random, truncated and corrupted responses (fast-check, fixed
 * seed). The cases run in a child process with a 64 MB heap and a time limit (fetch-decoder-cases.ts): a decoder
 * that trusts a negative record length or a record count of 2^31 runs out of memory or loops, which must fail
 * this test rather than take the runner down; a bounded decoder raises a FetchDecodeError.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const CASES = fileURLToPath(new URL('./fetch-decoder-cases.ts', import.meta.url));
const HEAP_MB = 64;
const TIME_LIMIT_MS = 30_000;

const names = [
  'valid responses decode to what was encoded',
  'a record set cut by the byte limit yields the complete batches before the cut',
  'a truncated response raises a FetchDecodeError',
  'random bytes after a valid header decode or raise a FetchDecodeError',
  'a valid response with bytes overwritten decodes or raises a FetchDecodeError',
  'a negative record length',
  'an absurd record count',
  'a negative or short batch length',
  'absurd header, aborted-transaction, partition and topic counts',
  'key, value and header lengths past their record',
];

interface Run {
  readonly lines: string[];
  readonly stderr: string;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly timedOut: boolean;
}

function runCases(): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [`--max-old-space-size=${HEAP_MB}`, '--import', 'tsx', CASES], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-4000);
    });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, TIME_LIMIT_MS);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ lines: stdout.split('\n'), stderr, code, signal, timedOut });
    });
  });
}

describe('changelog fetch decoder: lengths and counts bounded by the bytes present', () => {
  let run: Run;
  before(async () => {
    run = await runCases();
  });

  for (const name of names) {
    it(name, () => {
      if (run.lines.includes(`ok ${name}`)) return;
      const failure = run.lines.find((l) => l.startsWith(`fail ${name}: `));
      if (failure !== undefined) assert.fail(JSON.parse(failure.slice(`fail ${name}: `.length)) as string);
      const how = run.timedOut
        ? `killed after ${TIME_LIMIT_MS} ms`
        : `exit code ${run.code}, signal ${run.signal} (heap ${HEAP_MB} MB)`;
      const started = run.lines.includes(`start ${name}`);
      assert.fail(
        `${started ? 'the decoder cases died in this case' : 'this case never ran'}: ${how}\n${run.stderr}`,
      );
    });
  }

  it('the child ran every case and exited cleanly', () => {
    assert.equal(run.timedOut, false);
    assert.equal(run.code, 0, run.stderr);
    const ran = run.lines.filter((l) => l.startsWith('start ')).map((l) => l.slice('start '.length));
    assert.deepEqual(ran, names);
  });
});
