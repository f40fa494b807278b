import type { SplitPiece } from './parse.js';

/** Main thread to parse worker: input chunks in order, then the end of each source. */
export type ToWorker =
  | { readonly kind: 'chunk'; readonly data: Uint8Array }
  | { readonly kind: 'end'; readonly aborted: boolean };

/**
 * Parse worker to main thread: one reply per message, in order; `chunk` is the chunk's buffer, moved back.
 */
export interface ParsedPiece {
  readonly pieces: readonly SplitPiece[];
  readonly chunk: ArrayBuffer | undefined;
}
