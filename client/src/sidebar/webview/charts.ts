/// <reference lib="dom" />
/**
 * Plain SVG charts for the benchmark view, drawn with DOM calls (no innerHTML, no inline styles: the CSP allows
 * neither). Colours come from CSS classes (`series-*` in webview.css) that map to `--vscode-charts-*` variables.
 */

import { AB_ARMS } from '../../../../common/bench-events';

const SVG_NS = 'http://www.w3.org/2000/svg';

type Attrs = Record<string, string | number | undefined>;

export function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Array<SVGElement | string>): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined) el.setAttribute(k, String(v));
  for (const c of children) el.append(typeof c === 'string' ? document.createTextNode(c) : c);
  return el;
}

/**
 * CSS class for a backend's colour; other backends take the spare colours in order, except the A/B arms: an A/B run has
 * up to five arms and none of the preset backends, so each arm takes the spare colour of its place in AB_ARMS (by
 * position in the run, a loss check's fourth arm took the first arm's colour).
 */
export function seriesClass(backend: string, index = 0): string {
  if (backend === 'bf16' || backend === 'te' || backend === 'torch-fp8') return `series-${backend}`;
  const arm = AB_ARMS.findIndex((a) => a.id === backend);
  return `series-other-${arm >= 0 ? arm : index % 3}`;
}

export interface Bar {
  label: string;
  value: number | undefined;
  /** Shown at the end of the bar. */
  text: string;
  /** Colour class (`series-*`) and optional modifiers (`run-b`). */
  cls: string;
  /** Tooltip. */
  title?: string;
}

/** Horizontal bars (one row per bar): fits a narrow sidebar better than columns. */
export function barChart(bars: Bar[], options: { width: number; label: string }): SVGSVGElement {
  const width = Math.max(160, Math.round(options.width));
  const rowHeight = 20;
  const gap = 6;
  const labelWidth = Math.min(120, Math.round(width * 0.34));
  const valueWidth = 74;
  const plotWidth = Math.max(20, width - labelWidth - valueWidth - 8);
  const height = bars.length * (rowHeight + gap) + gap;
  const max = Math.max(0, ...bars.map((b) => (b.value !== undefined && Number.isFinite(b.value) ? b.value : 0)));
  const root = svg('svg', { class: 'chart bar-chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': options.label });
  root.append(svg('title', {}, options.label));
  bars.forEach((bar, i) => {
    const y = gap + i * (rowHeight + gap);
    const group = svg('g', { class: bar.cls });
    group.append(svg('title', {}, `${bar.title ?? bar.label}: ${bar.text}`));
    group.append(svg('text', { x: labelWidth - 6, y: y + rowHeight / 2, class: 'label', 'text-anchor': 'end', 'dominant-baseline': 'middle' }, truncate(bar.label, Math.floor(labelWidth / 6.5))));
    group.append(svg('rect', { x: labelWidth, y, width: plotWidth, height: rowHeight, class: 'track', rx: 2 }));
    const w = bar.value !== undefined && max > 0 ? Math.max(1, (bar.value / max) * plotWidth) : 0;
    if (w > 0) group.append(svg('rect', { x: labelWidth, y, width: w.toFixed(1), height: rowHeight, class: 'bar', rx: 2 }));
    group.append(svg('text', { x: labelWidth + plotWidth + 6, y: y + rowHeight / 2, class: 'value', 'dominant-baseline': 'middle' }, bar.text));
    root.append(group);
  });
  return root;
}

export interface Series {
  label: string;
  cls: string;
  /** [x, y]; y null breaks the line. */
  points: Array<[number, number | null]>;
}

/** Loss curves: one polyline per series, shared axes, three y ticks. */
export function lineChart(
  series: Series[],
  options: { width: number; height?: number; label: string; xLabel: string; marker?: { x: number; label: string } },
): SVGSVGElement {
  const width = Math.max(160, Math.round(options.width));
  const height = options.height ?? 170;
  const margin = { left: 46, right: 10, top: 8, bottom: 28 };
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const xs: number[] = [];
  const ys: number[] = [];
  for (const s of series) {
    for (const [x, y] of s.points) {
      if (y === null || !Number.isFinite(y)) continue;
      xs.push(x);
      ys.push(y);
    }
  }
  const root = svg('svg', { class: 'chart line-chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': options.label });
  root.append(svg('title', {}, options.label));
  if (ys.length === 0) {
    root.append(svg('text', { x: width / 2, y: height / 2, class: 'label', 'text-anchor': 'middle' }, 'no loss values'));
    return root;
  }
  const xMin = Math.min(...xs);
  const xMax = Math.max(...xs) === xMin ? xMin + 1 : Math.max(...xs);
  let yMin = Math.min(...ys);
  let yMax = Math.max(...ys);
  if (yMax === yMin) {
    yMax += Math.abs(yMax) * 0.05 || 1;
    yMin -= Math.abs(yMin) * 0.05 || 1;
  }
  const pad = (yMax - yMin) * 0.05;
  yMin -= pad;
  yMax += pad;
  const sx = (x: number) => margin.left + ((x - xMin) / (xMax - xMin)) * plotW;
  const sy = (y: number) => margin.top + (1 - (y - yMin) / (yMax - yMin)) * plotH;

  const axes = svg('g', { class: 'axes' });
  for (let i = 0; i <= 2; i++) {
    const v = yMin + ((yMax - yMin) * i) / 2;
    const y = sy(v);
    axes.append(svg('line', { x1: margin.left, x2: width - margin.right, y1: y.toFixed(1), y2: y.toFixed(1), class: 'grid' }));
    axes.append(svg('text', { x: margin.left - 4, y: y.toFixed(1), class: 'tick', 'text-anchor': 'end', 'dominant-baseline': 'middle' }, formatTick(v)));
  }
  const base = height - margin.bottom;
  axes.append(svg('line', { x1: margin.left, x2: width - margin.right, y1: base, y2: base, class: 'axis' }));
  const xTick = (v: number) => (Number.isInteger(v) ? String(v) : formatTick(v));
  axes.append(svg('text', { x: margin.left, y: base + 14, class: 'tick', 'text-anchor': 'start' }, xTick(xMin)));
  axes.append(svg('text', { x: width - margin.right, y: base + 14, class: 'tick', 'text-anchor': 'end' }, xTick(xMax)));
  axes.append(svg('text', { x: margin.left + plotW / 2, y: base + 14, class: 'tick', 'text-anchor': 'middle' }, options.xLabel));
  if (options.marker && options.marker.x > xMin && options.marker.x < xMax) {
    const x = sx(options.marker.x).toFixed(1);
    axes.append(svg('line', { x1: x, x2: x, y1: margin.top, y2: base, class: 'marker' }));
    axes.append(svg('text', { x: Number(x) + 3, y: margin.top + 8, class: 'tick' }, options.marker.label));
  }
  root.append(axes);

  for (const s of series) {
    let d = '';
    let pen = false;
    // More points than pixels only costs time: keep about two per pixel.
    const step = Math.max(1, Math.floor(s.points.length / (plotW * 2)));
    for (let i = 0; i < s.points.length; i += step) {
      const [x, y] = s.points[i];
      if (y === null || !Number.isFinite(y)) {
        pen = false;
        continue;
      }
      d += `${pen ? 'L' : 'M'}${sx(x).toFixed(1)} ${sy(y).toFixed(1)} `;
      pen = true;
    }
    const group = svg('g', { class: s.cls });
    group.append(svg('title', {}, s.label));
    if (d) group.append(svg('path', { d: d.trim(), class: 'line' }));
    root.append(group);
  }
  return root;
}

function formatTick(v: number): string {
  if (!Number.isFinite(v)) return '';
  const a = Math.abs(v);
  if (a >= 1000) return Math.round(v).toLocaleString('en-US');
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(1, max - 1))}…`;
}
