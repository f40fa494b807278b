#!/usr/bin/env node
// Entry point of the `idem` command (bin/idem.js imports the built copy of this file).
import { importOrExit } from './exit-code.js';

const program = await importOrExit(() => import('./program.js'), 'idem');
process.exitCode = await program.run(process.argv);
