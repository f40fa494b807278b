import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

// A code block of docs/postgres-inbox.md marked `<!-- snippet: path -->` is copied from that file, which the
// compiler checks and the tests run: the block must still be there, line for line (indentation aside).

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PAGES = ['docs/postgres-inbox.md'];
const SNIPPET = /<!-- snippet: (\S+) -->\n```ts\n([\s\S]*?)\n```/g;

const lines = (text: string) => text.split('\n').map((line) => line.trim());

describe('docs code copied from compiled files', () => {
  for (const page of PAGES) {
    it(`${page}: every snippet is still in its file`, () => {
      const snippets = [...readFileSync(`${ROOT}${page}`, 'utf8').matchAll(SNIPPET)];
      assert.ok(snippets.length > 0, `${page} marks no snippet`);
      for (const [, path, code] of snippets) {
        const file = lines(readFileSync(`${ROOT}${path}`, 'utf8')).join('\n');
        assert.ok(
          file.includes(lines(code as string).join('\n')),
          `${page}: a snippet is no longer in ${path}`,
        );
      }
    });
  }
});
