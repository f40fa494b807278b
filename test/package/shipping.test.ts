import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, normalize, relative } from 'node:path';
import { after, describe, it } from 'node:test';
import { packedTarball, root } from './pack.js';

let unpacked: string | undefined;
after(() => {
  if (unpacked) rmSync(dirname(unpacked), { recursive: true, force: true });
});

/** The tarball unpacked once into a temporary directory (npm puts everything under `package/`). */
function unpack(): string {
  if (unpacked) return unpacked;
  const dir = mkdtempSync(join(tmpdir(), 'idem-shipped-'));
  execFileSync('tar', ['-xzf', packedTarball(), '-C', dir]);
  unpacked = join(dir, 'package');
  return unpacked;
}

/** Paths inside the packed tarball, relative to the package root. */
function shippedFiles(): Set<string> {
  const dir = unpack();
  return new Set(
    readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => relative(dir, join(e.parentPath, e.name))),
  );
}

function shippedText(path: string): string {
  return readFileSync(join(unpack(), path), 'utf8');
}

describe('what the packed tarball ships', () => {
  it('a LICENSE with the Apache-2.0 text the package declares', () => {
    const files = shippedFiles();
    assert.ok(files.has('LICENSE'));
    const license = shippedText('LICENSE');
    assert.match(license, /Apache License\s+Version 2\.0, January 2004/);
    assert.match(license, /END OF TERMS AND CONDITIONS/);
    assert.equal(JSON.parse(shippedText('package.json')).license, 'Apache-2.0');
  });

  it('no source maps pointing at the source it does not ship', () => {
    const files = [...shippedFiles()];
    assert.deepEqual(
      files.filter((f) => f.endsWith('.map')),
      [],
    );
    assert.deepEqual(
      files.filter((f) => f.startsWith('src/')),
      [],
    );
    const pointing = files
      .filter((f) => f.endsWith('.js') || f.endsWith('.d.ts'))
      .filter((f) => /sourceMappingURL/.test(shippedText(f)));
    assert.deepEqual(pointing, []);
  });

  it('every relative link in its Markdown files resolves to a shipped file', () => {
    const files = shippedFiles();
    const dangling: string[] = [];
    for (const doc of [...files].filter((f) => f.endsWith('.md'))) {
      for (const [, target] of shippedText(doc).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (target === undefined || /^[a-z]+:/i.test(target) || target.startsWith('#')) continue;
        const path = normalize(join(dirname(doc), target.split('#')[0] as string));
        if (!files.has(path) && ![...files].some((f) => f.startsWith(`${path}/`)))
          dangling.push(`${doc}: ${target}`);
      }
    }
    assert.deepEqual(dangling, []);
  });

  it('keywords, and every exports target it names', () => {
    const files = shippedFiles();
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    assert.ok(Array.isArray(pkg.keywords) && pkg.keywords.length > 0);
    const targets: string[] = [];
    const walk = (value: unknown): void => {
      if (typeof value === 'string') targets.push(value.replace(/^\.\//, ''));
      else if (value && typeof value === 'object') Object.values(value).forEach(walk);
    };
    walk(pkg.exports);
    walk(pkg.typesVersions);
    walk([pkg.main, pkg.types, ...Object.values(pkg.bin)]);
    assert.deepEqual(
      targets.filter((t) => !files.has(t)),
      [],
    );
  });
});
