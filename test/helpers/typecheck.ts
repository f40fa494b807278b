/**
 * Type-checks TypeScript a user would write, against this checkout's source: `idempotent-consumer` and each of
 * its subpaths (from package.json's exports) resolve to `src/`, under the repository's own strict tsconfig.
 * One program for every file given, so a test pays for the compiler once.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { root } from '../package/pack.js';

/** `idempotent-consumer/<subpath>` → its source file, for every entry point package.json exports. */
function sourcePaths(): Record<string, string[]> {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    exports: Record<string, { import?: { types?: string } }>;
  };
  const paths: Record<string, string[]> = {};
  for (const [key, target] of Object.entries(pkg.exports)) {
    const types = target.import?.types;
    if (!types) continue;
    const name = key === '.' ? 'idempotent-consumer' : `idempotent-consumer/${key.slice(2)}`;
    paths[name] = [join(root, types.replace(/^\.\/dist\//, 'src/').replace(/\.d\.ts$/, '.ts'))];
  }
  return paths;
}

/** A diagnostic as one line: `file:line: message`. */
export interface TypeProblem {
  readonly file: string;
  readonly line: number;
  readonly message: string;
}

/**
 * Compiles the given files (name → TypeScript text, names relative to a virtual directory in the checkout) and
 * answers the problems found in them; problems in `src/` fail too, as they would for a user.
 */
export function typecheck(files: Readonly<Record<string, string>>): TypeProblem[] {
  const config = ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  const dir = join(root, '.typecheck');
  const virtual = new Map(Object.entries(files).map(([name, text]) => [join(dir, name), text]));
  const options: ts.CompilerOptions = {
    ...parsed.options,
    noEmit: true,
    paths: sourcePaths(),
    baseUrl: root,
  };
  const host = ts.createCompilerHost(options);
  const { fileExists, readFile, getSourceFile } = host;
  host.fileExists = (name) => virtual.has(name) || fileExists.call(host, name);
  host.readFile = (name) => virtual.get(name) ?? readFile.call(host, name);
  host.getSourceFile = (name, language, onError, create) => {
    const text = virtual.get(name);
    return text === undefined
      ? getSourceFile.call(host, name, language, onError, create)
      : ts.createSourceFile(name, text, language, true);
  };
  const program = ts.createProgram([...virtual.keys()], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const file = d.file ? d.file.fileName.replace(`${dir}/`, '').replace(root, '') : '<options>';
    const line = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : 0;
    return { file, line, message: ts.flattenDiagnosticMessageText(d.messageText, ' ') };
  });
}

/** The problems as text, one per line, for an assertion message. */
export function describeProblems(problems: readonly TypeProblem[]): string {
  return problems.map((p) => `${p.file}:${p.line}: ${p.message}`).join('\n');
}
