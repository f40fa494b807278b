#!/usr/bin/env node
// The `idem` command. A packed or published package, and a git install (npm builds it through `prepare`), runs
// its compiled copy. A repository checkout runs the TypeScript source through tsx (a devDependency) when it has
// no build or its source changed since the build, so `npx idem` always runs what the checkout holds. A copy with
// neither a build nor tsx says so in one line.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const built = new URL('../dist/cli/main.js', import.meta.url);
const stamp = new URL('../dist/.built', import.meta.url);
const source = new URL('../src/cli/main.ts', import.meta.url);

/** True when a file under src/ is newer than the build (a checkout edited since `npm run build`). */
function sourceChanged() {
  const since = statSync(existsSync(stamp) ? stamp : built).mtimeMs;
  const dir = fileURLToPath(new URL('../src', import.meta.url));
  return readdirSync(dir, { recursive: true, withFileTypes: true }).some(
    (e) => e.isFile() && statSync(join(e.parentPath, e.name)).mtimeMs > since,
  );
}

const hasSource = existsSync(source);
if (existsSync(built) && !(hasSource && sourceChanged())) {
  await import(built.href);
} else {
  let register;
  if (hasSource) {
    try {
      ({ register } = await import('tsx/esm/api'));
    } catch {
      // Not a checkout with its dev dependencies: the build, if any, runs below.
    }
  }
  if (register !== undefined) {
    register();
    await import(source.href);
  } else if (existsSync(built)) {
    await import(built.href);
  } else {
    const dir = fileURLToPath(new URL('..', import.meta.url));
    process.stderr.write(
      `idem: this copy of idempotent-consumer (${dir}) is not built: it has no dist/; run \`npm install && npm run build\` there, or install a packed tarball (npm pack) or from git, which build it\n`,
    );
    process.exit(1);
  }
}
