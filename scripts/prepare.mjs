// `npm run prepare` (npm runs it after `npm install`/`npm ci` in a checkout, before `npm pack`/`npm publish`, and
// when it installs this package from git): builds dist/ unless it is newer than everything it is built from, so
// a git install gets a built package and a checkout's repeated `npm ci` does not rebuild for nothing.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const stamp = join(root, 'dist', '.built');
const inputs = [
  'src',
  'package.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'tsconfig.build.cjs.json',
  'scripts/build.mjs',
];

function newest(path) {
  const full = join(root, path);
  if (!existsSync(full)) return 0;
  const stat = statSync(full);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs;
  for (const entry of readdirSync(full, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) latest = Math.max(latest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  }
  return latest;
}

/** True when the build's compiler is installed: a checkout after `npm ci`, or npm's git install (dev dependencies). */
function canBuild() {
  try {
    createRequire(import.meta.url).resolve('typescript/bin/tsc');
    return true;
  } catch {
    return false;
  }
}

if (existsSync(stamp) && statSync(stamp).mtimeMs >= Math.max(...inputs.map(newest))) {
  console.log('[prepare] dist/ is up to date');
} else if (!canBuild()) {
  // `npm install ../checkout` links an unbuilt checkout and runs its prepare without its dev dependencies.
  // Failing here would abort the install before npm links `.bin/idem`, and `npx idem` would then ask the public
  // registry for a package named idem; finishing it lets bin/idem.js say the copy is not built.
  console.warn(
    `[prepare] not building dist/: this copy (${root}) has no dev dependencies (typescript); run \`npm install && npm run build\` there`,
  );
} else {
  console.log('[prepare] building dist/ (node scripts/build.mjs)');
  await import('./build.mjs'); // writes the stamp
}
