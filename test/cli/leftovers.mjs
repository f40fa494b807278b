/**
 * Runs the CLI, then reports what it left behind: `node leftovers.mjs <dist/cli/main.js> dedup …` (the CLI sees
 * the arguments after its entry point, as when started directly). After the run's exit code is set, the process
 * should end on its own at once; a timer or socket still alive 200 ms later (a store client's reconnect, a
 * disconnect wait) would keep it running. Those are printed on stderr as `leftover: Timeout, ...` and the exit
 * code becomes 99.
 */

import { setTimeout as delay } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';

const [main] = process.argv.splice(2, 1);
await import(pathToFileURL(main).href);
await delay(200); // close events and short-lived clean-up run first
const left = process
  .getActiveResourcesInfo()
  .filter((kind) => kind === 'Timeout' || kind.startsWith('TCP') || kind === 'Immediate');
if (left.length > 0) {
  process.stderr.write(`leftover: ${left.join(', ')}\n`);
  process.exitCode = 99;
}
