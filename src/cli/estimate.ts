import { open } from 'node:fs/promises';
import { STDIN } from './lines.js';

/** Bytes read from the start of each sampled file to measure its line length. */
const SAMPLE_BYTES = 64 * 1024;
/** Files sampled at most: with more, the first ones stand for the rest (one read each, before the run). */
const SAMPLED_FILES = 8;
const NEWLINE = 0x0a;

/**
 * About how many lines the file inputs hold (undefined for stdin only): their total size over the average
 * line length of a sample from the start of the first few files. Rough is enough: the key index still grows.
 */
export async function estimateLines(
  inputs: readonly { readonly name: string; readonly bytes: number }[],
): Promise<number | undefined> {
  const files = inputs.filter((input) => input.name !== STDIN);
  if (files.length === 0) return undefined;
  const totalBytes = files.reduce((sum, file) => sum + file.bytes, 0);
  let sampledBytes = 0;
  let sampledLines = 0;
  const buffer = Buffer.allocUnsafe(SAMPLE_BYTES);
  for (const file of files.slice(0, SAMPLED_FILES)) {
    if (file.bytes === 0) continue;
    const handle = await open(file.name, 'r');
    try {
      const { bytesRead } = await handle.read(buffer, 0, SAMPLE_BYTES, 0);
      const sample = buffer.subarray(0, bytesRead);
      let lines = 0;
      for (let at = sample.indexOf(NEWLINE); at !== -1; at = sample.indexOf(NEWLINE, at + 1)) lines++;
      const last = sample.lastIndexOf(NEWLINE);
      // The whole file: its lines exactly, an unterminated last one too. A part: its whole lines only (the cut
      // one would make lines look shorter), or one line when the sample holds no newline.
      const whole = bytesRead === file.bytes;
      sampledBytes += whole || last === -1 ? bytesRead : last + 1;
      sampledLines += whole ? lines + (last === bytesRead - 1 ? 0 : 1) : Math.max(lines, 1);
    } finally {
      await handle.close();
    }
  }
  if (sampledLines === 0) return 0;
  return Math.ceil((totalBytes * sampledLines) / sampledBytes);
}
