import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { root } from '../package/pack.js';

// Issue 20, §4: docs/ has an index, and every store has a page.
describe('docs/README.md, the index of the documentation', () => {
  const index = readFileSync(join(root, 'docs/README.md'), 'utf8');

  it('links every page of docs/, and only pages that exist', () => {
    const pages = readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md') && f !== 'README.md');
    for (const page of pages) assert.ok(index.includes(`](${page})`), `docs/README.md does not link ${page}`);
    for (const [, target] of index.matchAll(/\]\(([^)#]+)/g)) {
      assert.ok(existsSync(join(root, 'docs', target as string)), `docs/README.md links a missing ${target}`);
    }
  });

  it('every store of src/repositories/registry.ts has a page', () => {
    const registry = readFileSync(join(root, 'src/repositories/registry.ts'), 'utf8');
    const types = /repositoryTypes = \[([^\]]*)\]/.exec(registry)?.[1]?.match(/'([^']+)'/g) ?? [];
    assert.ok(types.length >= 6);
    const page: Record<string, string> = { kafka: 'kafka-repository.md' };
    for (const quoted of types) {
      const type = quoted.slice(1, -1);
      const file = page[type] ?? `${type}.md`;
      assert.ok(existsSync(join(root, 'docs', file)), `no docs/${file} for the ${type} store`);
    }
  });
});

/** The stores of src/repositories/registry.ts, by `repository.type`. */
function storeTypes(): string[] {
  const registry = readFileSync(join(root, 'src/repositories/registry.ts'), 'utf8');
  return (/repositoryTypes = \[([^\]]*)\]/.exec(registry)?.[1]?.match(/'([^']+)'/g) ?? []).map((q) =>
    q.slice(1, -1),
  );
}

describe('the store lists outside docs/ name every store', () => {
  /** How package.json's description names each store. */
  const described: Record<string, RegExp> = {
    rocksdb: /RocksDB/,
    memory: /memory/,
    redis: /Redis/,
    dynamodb: /DynamoDB/,
    cassandra: /Cassandra/,
    kafka: /Kafka topic/,
    postgres: /PostgreSQL/,
    mysql: /MySQL/,
  };

  it("package.json's description and keywords", () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      description: string;
      keywords: string[];
    };
    for (const type of storeTypes()) {
      const name = described[type];
      assert.ok(name, `no description name for the ${type} store in this test`);
      assert.match(pkg.description, name, `the description does not name the ${type} store`);
      if (type !== 'memory') assert.ok(pkg.keywords.includes(type), `no keyword ${type}`);
    }
  });

  it("examples/idem.toml's list of repository types", () => {
    const toml = readFileSync(join(root, 'examples/idem.toml'), 'utf8');
    const listed = /^# (rocksdb \(default\)[^;]*);/m.exec(toml)?.[1];
    assert.ok(listed, 'examples/idem.toml lists the types after [repository]');
    const types = listed.split('|').map((t) => t.replace('(default)', '').trim());
    assert.deepEqual([...types].sort(), storeTypes().sort());
  });
});

describe("the README's test-stack lines", () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');

  /** The README's paragraphs and list items, and each line of a code block on its own. */
  function blocks(): string[] {
    const out: string[] = [];
    let current: string[] = [];
    let code = false;
    const flush = () => {
      if (current.length > 0) out.push(current.join('\n'));
      current = [];
    };
    for (const line of readme.split('\n')) {
      if (line.startsWith('```')) {
        flush();
        code = !code;
      } else if (code || line.trim() === '' || /^\s*[-*] /.test(line)) {
        flush();
        if (line.trim() !== '') current.push(line);
        if (code) flush();
      } else {
        current.push(line);
      }
    }
    flush();
    return out;
  }

  it('each line saying what npm test starts names all six servers, and apt all three packages', () => {
    const starts = blocks().filter((block) => /npm test`?\s.*\bstarts\b/s.test(block));
    assert.ok(starts.length >= 2, `found ${starts.length} lines saying what npm test starts`);
    for (const block of starts) {
      for (const server of ['Redis', 'dynalite', 'Cassandra', 'Kafka', 'PostgreSQL', 'MariaDB']) {
        assert.ok(block.includes(server), `names no ${server}: ${block}`);
      }
    }
    const apt = blocks().filter((block) => /\bapt\b/.test(block));
    assert.ok(apt.length >= 1, 'no line says what comes from apt');
    for (const block of apt) {
      for (const name of ['redis-server', 'postgresql', 'mariadb-server']) {
        assert.ok(block.includes(`\`${name}\``), `names no \`${name}\`: ${block}`);
      }
    }
  });
});
