// Worker thread of `idem dedup`: splits input into lines and parses them, so JSON.parse runs on the second
// core while the main thread talks to the store and writes output. Messages are handled strictly in order.
import { parentPort, workerData } from 'node:worker_threads';
import { compileId } from './id.js';
import { parseLines } from './parse.js';
import type { ParsedPiece, ToWorker } from './worker-protocol.js';

const { idExpression } = workerData as { idExpression: string };
const idOf = compileId(idExpression);
const port = parentPort as NonNullable<typeof parentPort>;
/** The unfinished last line of the current source. */
let rest: Uint8Array | undefined;

port.on('message', (message: ToWorker) => {
  if (message.kind === 'close') {
    port.close();
    return;
  }
  const incoming = message.kind === 'chunk' ? message.data : new Uint8Array(0);
  const data = rest === undefined ? incoming : Buffer.concat([rest, incoming]);
  // At the end of a source its last line counts even without a newline; after an abort it was cut short.
  const final = message.kind === 'end' && !message.aborted;
  const parsed = parseLines(data, idOf, final);
  rest = parsed.consumed < data.length && message.kind === 'chunk' ? data.slice(parsed.consumed) : undefined;
  // An exact-size copy of the lines can be transferred; the input piece may share its memory with `rest`.
  const lines = new Uint8Array(data.subarray(0, parsed.consumed));
  const reply: ParsedPiece = { ...parsed, data: lines };
  port.postMessage(reply, [
    lines.buffer,
    parsed.starts.buffer as ArrayBuffer,
    parsed.ends.buffer as ArrayBuffer,
  ]);
});
