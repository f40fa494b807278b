import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { root } from '../package/pack.js';

// Issue 20, §4: docs/ has an index, and every store has a page.
describe('docs/README.md, the index of the documentation', () => {
  const index = readFileSync(join(root, 'docs/README.md'), 'utf8');

  it('links every page of docs/, and only pages that exist', () => {
    const pages = readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md') && f !== 'README.md');
    for (const page of pages) assert.ok(index.includes(`](${page})`), `docs/README.md does not link ${page}`);
    for (const [, target] of index.matchAll(/\]\(([^)#]+)/g)) {
      assert.ok(existsSync(join(root, 'docs', target as string)), `docs/README.md links a missing ${target}`);
    }
  });

  it('every store of src/repositories/registry.ts has a page', () => {
    const registry = readFileSync(join(root, 'src/repositories/registry.ts'), 'utf8');
    const types = /repositoryTypes = \[([^\]]*)\]/.exec(registry)?.[1]?.match(/'([^']+)'/g) ?? [];
    assert.ok(types.length >= 6);
    const page: Record<string, string> = { kafka: 'kafka-repository.md', memory: 'config.md' };
    for (const quoted of types) {
      const type = quoted.slice(1, -1);
      const file = page[type] ?? `${type}.md`;
      assert.ok(existsSync(join(root, 'docs', file)), `no docs/${file} for the ${type} store`);
    }
  });
});
