import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import ts from 'typescript';
import { snippetsOf } from '../docs/snippets.js';
import { cleanEnv, installedProject } from './pack.js';

// Issue 20, §4: docs/config.md's "from code" snippet runs as written, in a fresh project that installed the
// packed tarball (the other snippets are type-checked by test/docs/snippets.test.ts).
describe("docs/config.md's 'Using it from code' snippet (packed tarball)", () => {
  it('runs as written: loads the config, opens the store, handles a message', () => {
    const [snippet] = snippetsOf('docs/config.md');
    assert.ok(
      snippet && /loadConfig/.test(snippet.code),
      'the snippet is the first ts block of docs/config.md',
    );
    const js = ts.transpileModule(snippet.code, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    const dir = mkdtempSync(join(installedProject('full'), 'docs-run-'));
    try {
      writeFileSync(join(dir, 'app.mjs'), js);
      writeFileSync(
        join(dir, 'app.toml'),
        '[app]\nname = "billing"\n\n[consumer]\nid = "id"\n\n[repository]\ntype = "memory"\n',
      );
      const result = spawnSync(process.execPath, ['app.mjs', 'app.toml'], {
        cwd: dir,
        encoding: 'utf8',
        env: cleanEnv({ IDEM_CONFIG: '' }),
      });
      assert.equal(result.status, 0, result.stderr);
      assert.equal(result.stdout.trim(), 'billing: processed');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
