/**
 * The report's one chart, generated from the numbers: one horizontal bar per ratio that has a target, its length
 * the share of the target reached (1 = exactly on target, drawn as a vertical line), green when met, red when
 * missed. "Reached" reads the same way for both kinds of target: value / target when higher is better,
 * target / value when lower is better. No dependency: plain SVG text.
 */
import { meetsTarget, type Ratio } from './figures.js';

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

/** The SVG of the ratios that have a target. */
export function ratioChart(ratios: readonly Ratio[], title: string): string {
  const rows = ratios.filter((r): r is Ratio & { target: number } => r.target !== undefined);
  const plot = WIDTH - LABEL_WIDTH - 40;
  const x = (share: number) => LABEL_WIDTH + (Math.min(share, SCALE_MAX) / SCALE_MAX) * plot;
  const height = TOP + rows.length * (BAR_HEIGHT + GAP) + BOTTOM;
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
    '</svg>',
  );
  return `${parts.join('\n')}\n`;
}
