// Worker thread of `idem dedup`: splits input into lines and reads their ids, so that work runs on the second
// core while the main thread talks to the store and writes output. Messages are handled strictly in order.
import { parentPort, workerData } from 'node:worker_threads';
import { compileId } from './id.js';
import { LineSplitter, type ParsedPiece, type SplitPiece, type ToWorker, type WorkerData } from './parse.js';

const { idExpression, maxLineBytes } = workerData as WorkerData;
const port = parentPort as NonNullable<typeof parentPort>;
/** One splitter for all sources in turn: `end` resets it for the next. */
const splitter = new LineSplitter(compileId(idExpression), maxLineBytes);

port.on('message', (message: ToWorker) => {
  // After an abort the last line was cut short, so it does not count.
  const pieces: SplitPiece[] =
    message.kind === 'chunk' ? splitter.push(message.data) : splitter.end(message.aborted);
  const chunk = message.kind === 'chunk' ? (message.data.buffer as ArrayBuffer) : undefined;
  // Every buffer moves rather than being copied; a piece's bytes may lie in the chunk's own buffer.
  const transfer = new Set<ArrayBuffer>(chunk ? [chunk] : []);
  for (const piece of pieces) {
    transfer.add(piece.data.buffer as ArrayBuffer);
    transfer.add(piece.starts.buffer as ArrayBuffer);
    transfer.add(piece.ends.buffer as ArrayBuffer);
  }
  const reply: ParsedPiece = { pieces, chunk };
  port.postMessage(reply, [...transfer]);
});
