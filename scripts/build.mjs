// `npm run build`: the library twice, as ES modules into dist/ and as CommonJS into dist/cjs/ (whose package.json
// says so), so `import` and `require` both load a native build without `require(esm)`. The CLI is ESM-only.
//   node scripts/build.mjs [outDir]    (default dist; the package tests build into a temporary directory)
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const outDir = resolve(process.argv[2] ?? join(root, 'dist'));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

function compile(project, out) {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [tsc, '-p', join(root, project), '--outDir', out], {
      stdio: 'inherit',
    });
    child.on('error', fail);
    child.on('exit', (code) =>
      code === 0 ? done() : fail(new Error(`tsc -p ${project} exited with ${code}`)),
    );
  });
}

rmSync(outDir, { recursive: true, force: true });
await Promise.all([
  compile('tsconfig.build.json', outDir),
  compile('tsconfig.build.cjs.json', join(outDir, 'cjs')),
]);
mkdirSync(join(outDir, 'cjs'), { recursive: true });
writeFileSync(join(outDir, 'cjs', 'package.json'), '{ "type": "commonjs" }\n');
