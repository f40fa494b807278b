#!/usr/bin/env node
// Prints the failed tests of a TAP log written by node's test runner, one block each: the suite path, the test's
// location and the first lines of its error. scripts/test.sh calls it after a failed run, so the end of a CI log
// names what failed (the "not ok" lines themselves may be thousands of lines above it).
//   node scripts/tap-failures.mjs <tap-log>
import { readFileSync } from 'node:fs';

const file = process.argv[2];
if (!file) {
  console.error('usage: node scripts/tap-failures.mjs <tap-log>');
  process.exit(2);
}
const lines = readFileSync(file, 'utf8').split('\n');
const MAX_ERROR_LINES = 8;

/** Suite names by indentation depth, from the "# Subtest:" lines seen so far. */
const path = [];
const failures = [];
for (let i = 0; i < lines.length; i++) {
  const line = lines[i];
  const subtest = /^( *)# Subtest: (.*)$/.exec(line);
  if (subtest) {
    const depth = subtest[1].length / 4;
    path.length = depth;
    path[depth] = subtest[2];
    continue;
  }
  const notOk = /^( *)not ok \d+ - (.*)$/.exec(line);
  if (!notOk) continue;
  const indent = notOk[1];
  const depth = indent.length / 4;
  const yaml = [];
  if (lines[i + 1]?.trim() === '---') {
    for (let j = i + 2; j < lines.length && lines[j].trim() !== '...'; j++) yaml.push(lines[j]);
  }
  const field = (name) => yaml.find((l) => l.trim().startsWith(`${name}:`))?.trim();
  // A suite that failed because a test in it failed adds nothing: that test has its own block.
  if (field('failureType')?.includes('subtestsFailed')) continue;
  const errorAt = yaml.findIndex((l) => l.trim().startsWith('error:'));
  const error = [];
  if (errorAt >= 0) {
    const head = yaml[errorAt].trim().replace(/^error:\s*/, '');
    // A one-line message is quoted YAML ('…'); a longer one is a block (|-) on the lines below.
    if (head && head !== '|-' && head !== '|') error.push(head.replace(/^'(.*)'$/, '$1'));
    const errorIndent = yaml[errorAt].length - yaml[errorAt].trimStart().length;
    for (let j = errorAt + 1; j < yaml.length; j++) {
      const l = yaml[j];
      if (l.length - l.trimStart().length <= errorIndent && l.trim() !== '') break;
      error.push(l.trim());
    }
  }
  failures.push({
    name: [...path.slice(0, depth), notOk[2]].join(' > '),
    location: field('location'),
    error: error.filter(Boolean).slice(0, MAX_ERROR_LINES),
  });
}

if (failures.length === 0) {
  console.log(
    '(no TAP "not ok" line found: the runner failed outside a test, or wrote another format; see above)',
  );
} else {
  for (const f of failures) {
    console.log(`not ok: ${f.name}`);
    if (f.location) console.log(`  ${f.location}`);
    for (const l of f.error) console.log(`  ${l}`);
  }
  console.log(`${failures.length} failed test${failures.length === 1 ? '' : 's'}`);
}
