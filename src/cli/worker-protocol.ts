import type { SplitPiece } from './parse.js';

/** Main thread to parse worker: input pieces in order, then the end of each source. */
export type ToWorker =
  | { readonly kind: 'chunk'; readonly data: Uint8Array }
  | { readonly kind: 'end'; readonly aborted: boolean }
  | { readonly kind: 'close' };

/** Parse worker to main thread: one reply per `chunk` or `end`, in order, with the whole lines found. */
export type ParsedPiece = SplitPiece;
