import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { BenchFigures } from '../../bench/report/figures.js';
import { renderMarkdown } from '../../bench/report/markdown.js';
import { ratioChart } from '../../bench/report/svg.js';

// Issue 22, "How cost grows": a bench's table and curves reach docs/benchmarks.md and its chart.
const growth: BenchFigures = {
  bench: 'rocksdb-growth',
  command: 'node --import tsx bench/repositories/rocksdb-growth.ts --sizes 1000000,10000000',
  figures: [{ label: '1M ids: lazy mark', value: 3.1, unit: 'µs/id' }],
  ratios: [
    {
      id: 'rocksdb-growth.lazy-10M-vs-1M',
      label: 'RocksDB lazy mark, µs/id at 10M vs 1M ids stored',
      value: 1.2,
      target: 1.5,
      kind: 'max',
      baseline: 'the same store and workload at 1M ids',
    },
  ],
  loadavg: [1.5, 1.2, 1],
  cores: 2,
  notes: [],
  tables: [
    {
      title: 'How cost grows: the RocksDB store at each size',
      columns: ['ids stored', 'lazy mark µs/id', 'startup ms'],
      rows: [
        ['1M', '3.10', '300 | 2000'],
        ['10M', '3.72', '900 | 20000'],
      ],
    },
  ],
  curves: [
    {
      id: 'rocksdb-growth.us-per-id',
      title: 'RocksDB check-and-mark as the store grows',
      x: 'ids stored',
      y: 'µs per id',
      series: [
        {
          name: 'lazy mark',
          points: [
            [1e6, 3.1],
            [1e7, 3.72],
          ],
        },
      ],
    },
    {
      id: 'rocksdb-growth.startup',
      title: 'RocksDB startup as the store grows',
      x: 'ids stored',
      y: 'ms',
      series: [
        {
          name: 'graceful close',
          points: [
            [1e6, 300],
            [1e7, 4000],
          ],
        },
      ],
      limit: 5000,
    },
  ],
};

describe('bench report: tables and curves', () => {
  it("renders a bench's table as its own section of docs/benchmarks.md", () => {
    const md = renderMarkdown({
      runs: [{ name: 'rocksdb-growth', file: 'bench/repositories/rocksdb-growth.ts', figures: growth }],
      started: new Date(0),
      full: false,
      chart: 'benchmarks.svg',
    });
    const lines = md.split('\n');
    const heading = lines.indexOf('## How cost grows: the RocksDB store at each size');
    assert.ok(heading > 0, md);
    assert.ok(heading < lines.indexOf('## Figures per bench'));
    assert.ok(md.includes(growth.command));
    assert.ok(lines.includes('| ids stored | lazy mark µs/id | startup ms |'));
    assert.ok(lines.includes('|---|---|---|'));
    // A `|` inside a cell is escaped, so the row keeps its columns.
    assert.ok(lines.includes('| 10M | 3.72 | 900 \\| 20000 |'), md);
  });

  it("says when a bench's figures come from a separate run (--figures), under its table and its figures", () => {
    const render = (measuredApart: boolean) =>
      renderMarkdown({
        runs: [
          {
            name: 'rocksdb-growth',
            file: 'bench/repositories/rocksdb-growth.ts',
            figures: growth,
            measuredApart,
          },
        ],
        started: new Date(0),
        full: false,
        chart: 'benchmarks.svg',
      });
    const note = "Measured in a separate run of that command, not in this report's run.";
    assert.equal(render(true).split(note).length - 1, 2, render(true));
    assert.ok(!render(false).includes(note));
  });

  it('draws each curve in the chart, below the bars, with a target line within range', () => {
    const svg = ratioChart(growth.ratios, 'title', growth.curves);
    const polylines = [...svg.matchAll(/<polyline points="([^"]+)"/g)].map((m) => m[1] as string);
    assert.equal(polylines.length, 2);
    const bars = Number(/<rect x="430" y="(\d+)"/.exec(svg)?.[1]);
    for (const line of polylines) {
      const points = line.split(' ').map((p) => p.split(',').map(Number) as [number, number]);
      assert.equal(points.length, 2);
      const [[x1, y1], [x2, y2]] = points as [[number, number], [number, number]];
      // x grows with the ids; y grows up (a larger value is drawn higher); both panels sit below the bars.
      assert.ok(x2 > x1 && y2 < y1, line);
      assert.ok(y1 > bars && y2 > bars, line);
    }
    assert.ok(svg.includes('stroke-dasharray'), 'the 5 s limit is drawn');
    assert.ok(svg.includes('RocksDB check-and-mark as the store grows'));
    // The canvas grows to hold the panels.
    const height = Number(/height="(\d+)"/.exec(svg)?.[1]);
    assert.ok(
      height > Math.max(...polylines.flatMap((l) => l.split(' ').map((p) => Number(p.split(',')[1])))),
    );
    assert.equal(ratioChart(growth.ratios, 'title').includes('<polyline'), false);
  });
});

/**
 * The command line scripts/stack/lib.sh would start `server` with, and the endpoint its pid file would record:
 * nothing is installed, initialised or started (stack_spawn prints instead).
 */
function stackCommand(server: 'postgres' | 'mysql', env: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'idem-stack-args-'));
  try {
    mkdirSync(join(dir, 'mysql', 'data', 'mysql'), { recursive: true });
    const script = [
      'source scripts/stack/lib.sh',
      'stack_init_dirs',
      'stack_ensure_postgres_binary() { :; }; stack_postgres_init() { :; }; stack_ensure_mariadb_binary() { :; }',
      'stack_db_home() { echo "$STACK_DIR/$1"; }; stack_as_postgres_cmd() { STACK_AS_POSTGRES=(); }',
      'stack_spawn() { shift 2; echo "$*"; }',
      `stack_start_native_${server}`,
      `stack_endpoint_of ${server}`,
    ].join('\n');
    const { POSTGRES_FSYNC: _fsync, MYSQL_DURABLE: _durable, ...inherited } = process.env;
    return execFileSync('bash', ['-c', script], {
      env: { ...inherited, IDEM_STACK_DIR: dir, POSTGRES_TLS: '0', MYSQL_TLS: '0', ...env },
      encoding: 'utf8',
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// Issue 34: the inbox rows with fsync on too, from a second stack the report starts durable (bench/report/run.ts).
describe("bench report: the inbox-durable spec's servers", () => {
  it('starts PostgreSQL without fsync by default, and with fsync, full page writes and synchronous commit on', () => {
    const stack = stackCommand('postgres', {});
    assert.match(stack, / -c fsync=off -c full_page_writes=off/);
    assert.doesNotMatch(stack, /fsync=on|\(fsync on\)/);
    const durable = stackCommand('postgres', { POSTGRES_FSYNC: 'on' });
    assert.match(durable, / -c fsync=on -c full_page_writes=on -c synchronous_commit=on/);
    assert.doesNotMatch(durable, /fsync=off|full_page_writes=off/);
    // The mode is part of the recorded endpoint: up.sh does not reuse a server started in the other mode.
    assert.match(durable, /\(fsync on\)\n$/);
  });

  it('starts MariaDB flushing its log every second by default, and at every commit with MYSQL_DURABLE=1', () => {
    const stack = stackCommand('mysql', {});
    assert.match(stack, /--innodb-flush-log-at-trx-commit=2 /);
    assert.doesNotMatch(stack, /\(durable\)/);
    const durable = stackCommand('mysql', { MYSQL_DURABLE: '1' });
    assert.match(durable, /--innodb-flush-log-at-trx-commit=1 /);
    assert.match(durable, /\(durable\)\n$/);
  });
});
