// `npm run build`: the library twice, as ES modules into dist/ and as CommonJS into dist/cjs/ (whose package.json
// says so), so `import` and `require` both load a native build without `require(esm)`. The CLI is ESM-only.
//   node scripts/build.mjs [outDir]    (default dist; the package tests build into a temporary directory)
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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

/**
 * The emitted JavaScript without its comments: the declarations keep every TSDoc for editors, the code that runs
 * needs none, and the comments were half of the package's size (issue 20: what a library-only install weighs).
 */
function stripComments(dir, { declarations = false } = {}) {
  const ts = createRequire(import.meta.url)('typescript');
  const printer = ts.createPrinter({ removeComments: true });
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const declaration = entry.name.endsWith('.d.ts');
    if (!entry.isFile() || !(entry.name.endsWith('.js') || (declarations && declaration))) continue;
    const file = join(entry.parentPath, entry.name);
    const text = readFileSync(file, 'utf8');
    const kind = declaration ? ts.ScriptKind.TS : ts.ScriptKind.JS;
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, kind);
    writeFileSync(file, printer.printFile(source)); // the printer keeps a `#!` line
  }
}

rmSync(outDir, { recursive: true, force: true });
await Promise.all([
  compile('tsconfig.build.json', outDir),
  compile('tsconfig.build.cjs.json', join(outDir, 'cjs')),
]);
mkdirSync(join(outDir, 'cjs'), { recursive: true });
writeFileSync(join(outDir, 'cjs', 'package.json'), '{ "type": "commonjs" }\n');
stripComments(outDir);
// The CommonJS declarations are a second copy of the ES ones (the same text); editors show the TSDoc of either, so
// one copy keeps it and the other goes without, which keeps the package inside its size budget (test/package).
stripComments(join(outDir, 'cjs'), { declarations: true });
// scripts/prepare.mjs builds again only when an input is newer than this stamp.
writeFileSync(join(outDir, '.built'), `${new Date().toISOString()}\n`);
// The CLI and the node are commands, not entry points: no program imports their declarations.
for (const dir of ['cli', 'node']) {
  for (const entry of readdirSync(join(outDir, dir), { recursive: true, withFileTypes: true })) {
    if (entry.isFile() && entry.name.endsWith('.d.ts')) rmSync(join(entry.parentPath, entry.name));
  }
}
