// Worker thread of `idem dedup`: splits input into lines and reads their ids, so that work runs on the second
// core while the main thread talks to the store and writes output. Messages are handled strictly in order.
import { parentPort, workerData } from 'node:worker_threads';
import { compileId } from './id.js';
import { LineSplitter } from './parse.js';
import type { ParsedPiece, ToWorker } from './worker-protocol.js';

const { idExpression, maxLineBytes } = workerData as { idExpression: string; maxLineBytes: number };
const port = parentPort as NonNullable<typeof parentPort>;
/** One splitter for all sources in turn: `end` resets it for the next. */
const splitter = new LineSplitter(compileId(idExpression), maxLineBytes);

port.on('message', (message: ToWorker) => {
  if (message.kind === 'close') {
    port.close();
    return;
  }
  // After an abort the last line was cut short, so it does not count.
  const reply: ParsedPiece =
    message.kind === 'chunk' ? splitter.push(message.data) : splitter.end(message.aborted);
  port.postMessage(reply, [
    reply.data.buffer as ArrayBuffer,
    reply.starts.buffer as ArrayBuffer,
    reply.ends.buffer as ArrayBuffer,
  ]);
});
