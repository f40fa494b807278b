/** The dedup node without the CLI (for the tests and benches): `node --import tsx src/node/bin.ts --config node.toml`. */
import { parseArgs } from 'node:util';
import { commandLine } from '../util/command-line.js';
import { nodeExitCodes, runNode } from './main.js';

let configPath: string | undefined;
try {
  configPath = parseArgs({ options: { config: { type: 'string', short: 'c' } } }).values.config;
} catch (error) {
  process.stderr.write(
    `${commandLine('idem node', (error as Error).message)}\nusage: bin.ts --config node.toml\n`,
  );
  process.exit(nodeExitCodes.config);
}
const code = await runNode(configPath ? { configPath } : {});
// kafkajs and store clients can leave timers behind; the node is done and its log flushed, so leave now.
process.exit(code);
