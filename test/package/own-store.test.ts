import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'node:test';
import { cleanEnv, installedProject, root } from './pack.js';

const storeTest = `
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { repositoryContract } from 'idempotent-consumer/contract';
import { JsonFileRepository } from './json-file-repository.js';

const dir = mkdtempSync(join(tmpdir(), 'idem-own-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));
repositoryContract({
  name: 'json file',
  factory: ({ namespace }) => JsonFileRepository.open({ path: join(dir, encodeURIComponent(namespace) + '.json') }),
  capabilities: JsonFileRepository.capabilities,
});
`;

it("the example store passes the contract from the installed package, as a user's project runs it", () => {
  const project = installedProject('full');
  mkdirSync(join(project, 'formats'), { recursive: true });
  const dir = mkdtempSync(join(project, 'formats', 'own-store-'));
  try {
    writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ type: 'module' })}\n`);
    copyFileSync(
      join(root, 'examples/custom-store/json-file-repository.ts'),
      join(dir, 'json-file-repository.ts'),
    );
    writeFileSync(join(dir, 'store.test.ts'), storeTest);
    const tsconfig = {
      compilerOptions: {
        module: 'nodenext',
        target: 'ES2022',
        strict: true,
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [join(root, 'node_modules/@types')],
      },
      files: ['json-file-repository.ts', 'store.test.ts'],
    };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(tsconfig));
    const compiled = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', '.'], {
      cwd: dir,
      encoding: 'utf8',
    });
    assert.equal(compiled.status, 0, compiled.stdout + compiled.stderr);
    const run = spawnSync(process.execPath, ['--test', '--test-reporter=tap', 'store.test.js'], {
      cwd: dir,
      encoding: 'utf8',
      env: cleanEnv(),
    });
    assert.equal(run.status, 0, run.stdout + run.stderr);
    const passed = Number(/^# pass (\d+)/m.exec(run.stdout)?.[1]);
    assert.ok(passed >= 30, `only ${passed} contract tests passed:\n${run.stdout}`);
    assert.match(run.stdout, /^# fail 0$/m);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
