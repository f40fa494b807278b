/** The TypeScript blocks of the README and docs/*.md, as the snippet tests read them. */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { root } from '../package/pack.js';

/** One fenced ```ts block. */
export interface Snippet {
  /** `docs/config.md:218`: the file and the line of the opening fence. */
  readonly where: string;
  /** A file name for the compiler, unique per block. */
  readonly file: string;
  readonly code: string;
  /** The block opens with `// partial: …`: a fragment whose free names the reader supplies. */
  readonly partial: boolean;
  /** After a `<!-- snippet: <file> -->` line: an excerpt of that compiled file (test/examples/docs-snippets). */
  readonly copiedFrom: string | undefined;
  /**
   * For a fragment on a page with a `<!-- given: … -->` comment: declarations of the names the page's fragments
   * leave to the reader, typed as the reader's own code would be. The check compiles the fragment with them and
   * allows no free name, so a fragment cannot hide a mistake behind a name that would otherwise be `any`.
   */
  readonly given: string | undefined;
}

const GIVEN = /<!-- given:[^\n]*\n([\s\S]*?)\n-->/;

/** The markdown files whose snippets are checked: the README and every page of docs/. */
export function documentedFiles(): string[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

const FENCE = /^```(ts|typescript|tsx)\s*$/;

/** Every ```ts block of the file, in order. */
export function snippetsOf(path: string): Snippet[] {
  const text = readFileSync(join(root, path), 'utf8');
  const given = GIVEN.exec(text)?.[1];
  const lines = text.split('\n');
  const snippets: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!FENCE.test(lines[i] as string)) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !(lines[end] as string).startsWith('```')) end++;
    const code = lines.slice(start, end).join('\n');
    const where = `${path}:${start}`;
    const marker = /^<!-- snippet: (\S+) -->$/.exec((lines[i - 1] ?? '').trim());
    const partial = /^\s*\/\/ partial:/.test(code);
    snippets.push({
      where,
      file: `${path.replace(/[/.]/g, '_')}_${start}.ts`,
      code,
      partial,
      copiedFrom: marker?.[1],
      given: partial ? given : undefined,
    });
    i = end;
  }
  return snippets;
}

/** The package subpaths a snippet imports (`idempotent-consumer/redis` → `./redis`; the root is `.`). */
export function importedSubpaths(code: string): string[] {
  const found = new Set<string>();
  for (const m of code.matchAll(/from\s+['"](idempotent-consumer(?:\/[^'"]+)?)['"]/g)) {
    const specifier = m[1] as string;
    found.add(
      specifier === 'idempotent-consumer' ? '.' : `./${specifier.slice('idempotent-consumer/'.length)}`,
    );
  }
  return [...found];
}
