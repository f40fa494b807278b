import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import ts from 'typescript';
import { describeProblems, type TypeProblem, typecheck } from '../helpers/typecheck.js';
import { root } from '../package/pack.js';
import { documentedFiles, importedSubpaths, type Snippet, snippetsOf } from './snippets.js';

// Issue 20, §4: every TypeScript snippet of the README and docs/ is type-checked against the source, in one
// compiler program. A block that opens with `// partial: …` is a fragment: the names it leaves to the reader
// ("Cannot find name") are allowed, nothing else is.

/** "Cannot find name 'x'" (and its "did you mean" form): a name a fragment leaves to the reader. */
const FREE_NAME = [
  /^Cannot find name '/,
  /^Cannot find namespace '/,
  /^No value exists in scope for the shorthand property '/,
];

const exported = new Set(
  Object.keys((JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { exports: object }).exports),
);

const snippets: Snippet[] = documentedFiles().flatMap(snippetsOf);
let problems = new Map<string, TypeProblem[]>();

/** The entry points a snippet imports that this package does not export (yet). */
const missingEntryPoints = (s: Snippet) => importedSubpaths(s.code).filter((p) => !exported.has(p));

describe('the TypeScript snippets of the README and docs/', () => {
  before(() => {
    const files: Record<string, string> = {};
    // `export {}` makes each snippet a module of its own (top-level await, no shared globals).
    // The page's given declarations come after the code, so the compiler's line numbers stay the snippet's.
    for (const s of snippets)
      if (missingEntryPoints(s).length === 0) files[s.file] = `${s.code}\n${s.given ?? ''}\nexport {};\n`;
    problems = new Map();
    for (const problem of typecheck(files)) {
      const list = problems.get(problem.file) ?? [];
      list.push(problem);
      problems.set(problem.file, list);
    }
  });

  it("the README's snippets run in a CommonJS project (npm init -y): no top-level await", () => {
    const found: string[] = [];
    for (const snippet of snippets.filter((s) => s.where.startsWith('README.md:'))) {
      const source = ts.createSourceFile(snippet.file, snippet.code, ts.ScriptTarget.Latest, true);
      const visit = (node: ts.Node): void => {
        if (ts.isFunctionLike(node)) return;
        const awaits =
          ts.isAwaitExpression(node) || (ts.isForOfStatement(node) && node.awaitModifier !== undefined);
        if (awaits) {
          const line = source.getLineAndCharacterOfPosition(node.getStart()).line;
          found.push(
            `README.md:${Number(snippet.where.split(':')[1]) + line + 1}: ${node.getText().slice(0, 60)}`,
          );
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    assert.deepEqual(found, [], `top-level await, a syntax error in CommonJS:\n${found.join('\n')}`);
  });

  it('exist: the README and the pages have snippets to check', () => {
    assert.ok(snippets.length >= 15, `${snippets.length} snippets`);
  });

  it('compile the library itself without problems', () => {
    const own = [...problems.entries()].filter(([file]) => !snippets.some((s) => s.file === file));
    assert.deepEqual(own, [], describeProblems(own.flatMap(([, list]) => list)));
  });

  for (const snippet of snippets) {
    if (snippet.copiedFrom !== undefined) {
      const from = snippet.copiedFrom;
      it(`${snippet.where} is an excerpt of ${from}, which the compiler checks`, () => {
        assert.ok(existsSync(join(root, from)), `${from} does not exist`);
        assert.match(from, /\.ts$/);
        const included = (
          JSON.parse(readFileSync(join(root, 'tsconfig.json'), 'utf8').replace(/^\s*\/\/.*$/gm, '')) as {
            include: string[];
          }
        ).include;
        assert.ok(
          included.some((dir) => from.startsWith(`${dir.replace(/\/\*\*.*$/, '')}/`)),
          `${from} is outside tsconfig.json's include`,
        );
      });
      continue;
    }
    const missing = missingEntryPoints(snippet);
    const todo = missing.length > 0 ? `imports ${missing.join(', ')}, not an entry point here yet` : false;
    it(`${snippet.where}${snippet.partial ? ' (partial)' : ''} type-checks`, { todo }, () => {
      const found = (problems.get(snippet.file) ?? []).filter(
        (p) =>
          !(snippet.partial && snippet.given === undefined && FREE_NAME.some((re) => re.test(p.message))),
      );
      const lines = found.map(
        (p) =>
          `${snippet.where.replace(/:\d+$/, '')}:${Number(snippet.where.split(':')[1]) + p.line}: ${p.message}`,
      );
      assert.deepEqual(lines, [], lines.join('\n'));
    });
  }
});
