#!/usr/bin/env node
// Entry point of the `idem` command (bin/idem.js imports the built copy of this file).
import { asMissingDependency } from '../util/optional-module.js';

// The CLI's packages (commander, cli-progress; the node's pino, prom-client) are optional dependencies: a
// library-only install (`--omit=optional`) has none, and `idem` says so in one line.
let program: typeof import('./program.js');
try {
  program = await import('./program.js');
} catch (error) {
  const missing = asMissingDependency(error, { feature: 'idem' });
  if (missing === undefined) throw error;
  process.stderr.write(`${missing.message} (an install with --omit=optional leaves it out)\n`);
  process.exit(3);
}
process.exitCode = await program.run(process.argv);
