import type { SplitPiece } from './parse.js';

/** Main thread to parse worker: input chunks in order, then the end of each source. */
export type ToWorker =
  | { readonly kind: 'chunk'; readonly data: Uint8Array }
  | { readonly kind: 'end'; readonly aborted: boolean };

/**
 * Parse worker to main thread: one reply per `chunk` or `end`, in order, with the whole lines found. `chunk` is
 * the buffer of the chunk sent, moved back (some pieces' bytes lie in it), so the reader can reuse it.
 */
export interface ParsedPiece {
  readonly pieces: readonly SplitPiece[];
  readonly chunk: ArrayBuffer | undefined;
}
