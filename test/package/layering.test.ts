/*
 * The layering of src/: no import circle (type-only imports included), and no layer reaching up. Stores
 * (src/repositories) and the shared Kafka code (src/kafka) use the options funnel (src/options) and never import
 * config/, node/, adapters/, cli/ or di/; the funnel itself needs nothing but the error classes.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SRC = join(ROOT, 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.(ts|mts)$/.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

const SPECIFIER = /(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

/** src-relative path -> the src-relative paths it imports. */
function importGraph(): Map<string, string[]> {
  const files = sourceFiles(SRC);
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const targets: string[] = [];
    for (const match of text.matchAll(SPECIFIER)) {
      const spec = match[1] ?? match[2] ?? '';
      if (!spec.startsWith('.')) continue;
      const base = resolve(dirname(file), spec);
      const target = [base.replace(/\.js$/, '.ts'), `${base}.ts`, join(base, 'index.ts')].find((c) =>
        known.has(c),
      );
      if (target !== undefined) targets.push(relative(SRC, target));
    }
    graph.set(relative(SRC, file), targets);
  }
  return graph;
}

/** Strongly connected groups of more than one file (Tarjan). */
function circles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) === index.get(v)) {
      const group: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(group.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return out;
}

/** Imports from files under `from` into any of the `forbidden` folders, as `file -> target`. */
function reachingUp(graph: Map<string, string[]>, from: string, forbidden: readonly string[]): string[] {
  const bad: string[] = [];
  for (const [file, targets] of graph) {
    if (!file.startsWith(`${from}/`)) continue;
    for (const target of targets) {
      if (forbidden.some((f) => target.startsWith(`${f}/`) || target === `${f}.ts`))
        bad.push(`${file} -> ${target}`);
    }
  }
  return bad;
}

describe('layering of src/', () => {
  const graph = importGraph();

  it('reads the source tree', () => {
    assert.ok(graph.size > 100, `${graph.size} files`);
    assert.ok((graph.get('repositories/kafka/options.ts') ?? []).includes('kafka/connection.ts'));
  });

  it('has no import circle', () => {
    assert.deepEqual(circles(graph), []);
  });

  it('no store imports config/, node/, adapters/, cli/ or di/', () => {
    assert.deepEqual(reachingUp(graph, 'repositories', ['config', 'node', 'adapters', 'cli', 'di']), []);
  });

  it('the SQL core imports neither dialect: postgres/ and mysql/ build on repositories/sql, not the reverse', () => {
    assert.ok(graph.has('repositories/sql/repository.ts'));
    const dialects = ['repositories/postgres', 'repositories/mysql'];
    assert.deepEqual(reachingUp(graph, 'repositories/sql', dialects), []);
  });

  it('the store port (src/store) imports nothing but the error classes', () => {
    assert.ok(graph.has('store/types.ts'));
    const outside = [...graph]
      .filter(([file]) => file.startsWith('store/'))
      .flatMap(([file, targets]) =>
        targets.filter((t) => !t.startsWith('store/') && t !== 'errors.ts').map((t) => `${file} -> ${t}`),
      );
    assert.deepEqual(outside, []);
  });

  it('the shared Kafka code builds on the store port, never on a store (src/repositories)', () => {
    assert.deepEqual(reachingUp(graph, 'kafka', ['repositories']), []);
  });

  it('the leaf utilities (src/util) import no store, consumer or Kafka code', () => {
    assert.deepEqual(reachingUp(graph, 'util', ['repositories', 'consumer', 'kafka', 'contract']), []);
  });

  it('the shared Kafka code imports no config/, node/, adapters/, cli/ or di/', () => {
    assert.deepEqual(reachingUp(graph, 'kafka', ['config', 'node', 'adapters', 'cli', 'di']), []);
  });

  it('the options funnel needs only the error classes and leaf utilities', () => {
    // A leaf utility imports nothing from src/, so the funnel stays the lowest layer above errors.ts.
    const isLeafUtil = (t: string): boolean => t.startsWith('util/') && (graph.get(t) ?? []).length === 0;
    const outside = [...graph]
      .filter(([file]) => file.startsWith('options/'))
      .flatMap(([file, targets]) =>
        targets
          .filter((t) => !t.startsWith('options/') && t !== 'errors.ts' && !isLeafUtil(t))
          .map((t) => `${file} -> ${t}`),
      );
    assert.deepEqual([...new Set(outside)], []);
  });

  it("the node's running parts get their own settings, never the whole node config", () => {
    // Its start (dedup-node.ts, main.ts) and the start-time helpers it calls read NodeConfig; a part that runs per
    // batch names only the table it uses (`NodeConfig['dedup']`) or gets plain values.
    const parts = [
      'batch-loop',
      'catch-up',
      'chunk',
      'duplicates',
      'output',
      'partition-state',
      'supervisor',
    ];
    const whole = [...parts.map((p) => `node/${p}.ts`), 'node/exactly-once/transaction.ts'].filter((file) =>
      /\bNodeConfig\b(?!\[)/.test(readFileSync(join(SRC, file), 'utf8').replace(/^import [^;]*;$/gm, '')),
    );
    assert.deepEqual(whole, []);
  });
});
