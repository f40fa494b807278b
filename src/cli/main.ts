#!/usr/bin/env node
// Entry point of the `idem` command (bin/idem.js imports the built copy of this file).
import { run } from './program.js';

process.exitCode = await run(process.argv);
