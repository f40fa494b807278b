/**
 * The report's one chart, generated from the numbers: one horizontal bar per ratio that has a target, its length
 * the share of the target reached (1 = exactly on target, drawn as a vertical line), green when met, red when
 * missed. "Reached" reads the same way for both kinds of target: value / target when higher is better,
 * target / value when lower is better. Below the bars, the benches' curves (e.g. cost against ids stored), two
 * panels a row. No dependency: plain SVG text.
 */
import { type Curve, meetsTarget, type Ratio } from './figures.js';

const WIDTH = 860;
const LABEL_WIDTH = 430;
const BAR_HEIGHT = 22;
const GAP = 12;
const TOP = 44;
const BOTTOM = 36;
/** Bars are drawn up to this many times the target; longer ones are cut and marked. */
const SCALE_MAX = 2.5;

/** The share of its target a ratio reaches (≥ 1: met). */
export function attainment(ratio: Ratio & { target: number }): number {
  return ratio.kind === 'min' ? ratio.value / ratio.target : ratio.target / ratio.value;
}

/** Escapes text for SVG content and attributes. */
function xml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** How a ratio and its target read, e.g. `3.75× (target ≤ 2×)`. */
export function describeRatio(ratio: Ratio): string {
  const value = `${ratio.value.toFixed(2)}×`;
  if (ratio.target === undefined) return value;
  return `${value} (target ${ratio.kind === 'min' ? '≥' : '≤'} ${ratio.target}×)`;
}

const PANEL_WIDTH = WIDTH / 2;
const PANEL_HEIGHT = 250;
const SERIES_COLOURS = ['#1f77b4', '#d9822b', '#7b4ea3', '#2e9d4f'];

/** A short number for an axis tick: 50M, 1.5k, 0.25. */
function tickLabel(n: number): string {
  if (n >= 1e6) return `${+(n / 1e6).toPrecision(3)}M`;
  if (n >= 1e3) return `${+(n / 1e3).toPrecision(3)}k`;
  return String(+n.toPrecision(3));
}

/** A tidy step for about `count` ticks from 0 to `max`. */
function tickStep(max: number, count: number): number {
  const raw = max / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  return ([1, 2, 2.5, 5, 10].find((m) => m * power >= raw) ?? 10) * power;
}

/**
 * One curve as a panel at (`left`, `top`): x on a log scale (sizes grow by factors), y linear from 0 so a
 * ratio between two points reads as their heights. A `limit` within the range is a dashed red line; above
 * it, a note says the curve stays below.
 */
function curvePanel(curve: Curve, left: number, top: number): string[] {
  const points = curve.series.flatMap((s) => s.points);
  if (points.length === 0) return [];
  const plotLeft = left + 56;
  const plotRight = left + PANEL_WIDTH - 16;
  const plotTop = top + 30;
  const plotBottom = top + PANEL_HEIGHT - 64;
  const xs = points.map(([px]) => px);
  const lo = Math.log10(Math.min(...xs));
  const hi = Math.log10(Math.max(...xs));
  const span = hi - lo || 1;
  const x = (v: number) =>
    plotLeft + ((Math.log10(v) - lo + (hi === lo ? 0.5 : 0)) / span) * (plotRight - plotLeft);
  const top_ = Math.max(...points.map(([, py]) => py)) * 1.15 || 1;
  const limitShown = curve.limit !== undefined && curve.limit <= top_ * 1.5;
  const yMax = limitShown ? Math.max(top_, (curve.limit as number) * 1.1) : top_;
  const y = (v: number) => plotBottom - (v / yMax) * (plotBottom - plotTop);
  const parts = [
    `<text x="${left + 12}" y="${top + 16}" font-weight="bold">${xml(curve.title)}</text>`,
    `<line x1="${plotLeft}" y1="${plotBottom}" x2="${plotRight}" y2="${plotBottom}" stroke="#222222"/>`,
    `<line x1="${plotLeft}" y1="${plotTop}" x2="${plotLeft}" y2="${plotBottom}" stroke="#222222"/>`,
    `<text x="${(plotLeft + plotRight) / 2}" y="${plotBottom + 32}" text-anchor="middle">${xml(curve.x)} (log scale)</text>`,
    `<text x="${left + 12}" y="${plotTop - 8}" fill="#555555">${xml(curve.y)}</text>`,
  ];
  const step = tickStep(yMax, 4);
  for (let v = 0; v <= yMax + step / 1e6; v += step) {
    const ty = y(v).toFixed(1);
    parts.push(
      `<line x1="${plotLeft}" y1="${ty}" x2="${plotRight}" y2="${ty}" stroke="#eeeeee"/>`,
      `<text x="${plotLeft - 6}" y="${(Number(ty) + 4).toFixed(1)}" text-anchor="end">${tickLabel(v)}</text>`,
    );
  }
  for (const v of [...new Set(xs)]) {
    parts.push(
      `<text x="${x(v).toFixed(1)}" y="${plotBottom + 16}" text-anchor="middle">${tickLabel(v)}</text>`,
    );
  }
  if (curve.limit !== undefined) {
    parts.push(
      limitShown
        ? `<line x1="${plotLeft}" y1="${y(curve.limit).toFixed(1)}" x2="${plotRight}" y2="${y(curve.limit).toFixed(1)}" stroke="#d0453a" stroke-dasharray="6 4"/>`
        : `<text x="${plotRight}" y="${plotTop - 8}" text-anchor="end" fill="#2e9d4f">target ${tickLabel(curve.limit)} ${xml(curve.y)}: far above</text>`,
    );
  }
  curve.series.forEach((series, i) => {
    const colour = SERIES_COLOURS[i % SERIES_COLOURS.length] as string;
    const path = series.points.map(([px, py]) => `${x(px).toFixed(1)},${y(py).toFixed(1)}`).join(' ');
    parts.push(`<polyline points="${path}" fill="none" stroke="${colour}" stroke-width="2"/>`);
    for (const [px, py] of series.points) {
      parts.push(
        `<circle cx="${x(px).toFixed(1)}" cy="${y(py).toFixed(1)}" r="3" fill="${colour}"><title>${xml(series.name)}: ${tickLabel(py)} ${xml(curve.y)} at ${tickLabel(px)}</title></circle>`,
      );
    }
    const legendX = left + 12 + (i % 2) * (PANEL_WIDTH / 2);
    const legendY = plotBottom + 48 + Math.floor(i / 2) * 14;
    parts.push(
      `<rect x="${legendX}" y="${legendY - 9}" width="12" height="3" fill="${colour}"/>`,
      `<text x="${legendX + 16}" y="${legendY}">${xml(series.name)}</text>`,
    );
  });
  return parts;
}

/** The SVG of the ratios that have a target, and below them the curves (if any). */
export function ratioChart(ratios: readonly Ratio[], title: string, curves: readonly Curve[] = []): string {
  const rows = ratios.filter((r): r is Ratio & { target: number } => r.target !== undefined);
  const plot = WIDTH - LABEL_WIDTH - 40;
  const x = (share: number) => LABEL_WIDTH + (Math.min(share, SCALE_MAX) / SCALE_MAX) * plot;
  const barsHeight = TOP + rows.length * (BAR_HEIGHT + GAP) + BOTTOM;
  const height = barsHeight + Math.ceil(curves.length / 2) * PANEL_HEIGHT;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="12" role="img">`,
    // A title element names the chart for screen readers (and Biome's accessibility lint).
    `<title>${xml(title)}</title>`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    `<text x="12" y="22" font-size="15" font-weight="bold">${xml(title)}</text>`,
  ];
  const axisY = TOP + rows.length * (BAR_HEIGHT + GAP);
  for (const tick of [0, 0.5, 1, 1.5, 2, 2.5]) {
    const tx = x(tick).toFixed(1);
    parts.push(
      `<line x1="${tx}" y1="${TOP - 6}" x2="${tx}" y2="${axisY}" stroke="${tick === 1 ? '#222222' : '#dddddd'}" stroke-width="${tick === 1 ? 2 : 1}"/>`,
      `<text x="${tx}" y="${axisY + 16}" text-anchor="middle">${tick === 1 ? 'target' : `${tick}×`}</text>`,
    );
  }
  rows.forEach((ratio, i) => {
    const y = TOP + i * (BAR_HEIGHT + GAP);
    const share = attainment(ratio);
    const met = meetsTarget(ratio) === true;
    const label = ratio.label.length > 66 ? `${ratio.label.slice(0, 65)}…` : ratio.label;
    const end = x(share);
    // The figure follows the bar, or sits inside its end (in white) when the bar reaches the right edge.
    const textX = Math.min(end, LABEL_WIDTH + plot - 150) + 6;
    parts.push(
      `<text x="12" y="${y + 15}"><title>${xml(ratio.label)} vs ${xml(ratio.baseline)}</title>${xml(label)}</text>`,
      `<rect x="${LABEL_WIDTH}" y="${y}" width="${(end - LABEL_WIDTH).toFixed(1)}" height="${BAR_HEIGHT}" fill="${met ? '#2e9d4f' : '#d0453a'}"/>`,
      `<text x="${textX.toFixed(1)}" y="${y + 15}" fill="${textX < end ? '#ffffff' : '#222222'}">${xml(describeRatio(ratio))}${share > SCALE_MAX ? ' ▸' : ''}</text>`,
    );
  });
  parts.push(
    `<text x="12" y="${axisY + 30}" fill="#555555">Bar: share of the target reached (value ÷ target, or target ÷ value where lower is better); green met, red missed.</text>`,
  );
  curves.forEach((curve, i) => {
    parts.push(...curvePanel(curve, (i % 2) * PANEL_WIDTH, barsHeight + Math.floor(i / 2) * PANEL_HEIGHT));
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}
