import assert from 'node:assert/strict';
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
