#!/usr/bin/env node
// The `idem` command. A published package runs its compiled copy; a repository checkout without a build runs
// the TypeScript source through tsx (a devDependency), so `npx idem` works right after `npm ci`.
import { existsSync } from 'node:fs';

const built = new URL('../dist/cli/main.js', import.meta.url);
if (existsSync(built)) {
  await import(built.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(new URL('../src/cli/main.ts', import.meta.url).href);
}
