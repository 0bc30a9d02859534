/**
 * Number formatting shared by the Markdown export and the webview (pure: no Node, no DOM, no `vscode`).
 */

/** 12345.6 -> "12,346"; 12.345 -> "12.3"; undefined -> "–". */
export function formatNumber(value: number | undefined | null, digits?: number): string {
  if (value === undefined || value === null || !Number.isFinite(value)) return '–';
  const d = digits ?? (Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : 2);
  return value.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
}

/** Bytes as GiB/MiB: 85899345920 -> "80.0 GiB". */
export function formatBytes(bytes: number | undefined | null): string {
  if (bytes === undefined || bytes === null || !Number.isFinite(bytes)) return '–';
  const gib = bytes / 1024 ** 3;
  if (gib >= 1) return `${gib.toFixed(gib >= 100 ? 0 : 1)} GiB`;
  const mib = bytes / 1024 ** 2;
  if (mib >= 1) return `${mib.toFixed(mib >= 100 ? 0 : 1)} MiB`;
  return `${Math.round(bytes)} B`;
}

/** A ratio as "1.34x"; undefined -> "–". */
export function formatRatio(ratio: number | undefined | null): string {
  if (ratio === undefined || ratio === null || !Number.isFinite(ratio)) return '–';
  return `${ratio.toFixed(2)}x`;
}

/** A signed difference: "+0.012", "-0.003". */
export function formatDelta(delta: number | undefined | null, digits = 3): string {
  if (delta === undefined || delta === null || !Number.isFinite(delta)) return '–';
  return `${delta >= 0 ? '+' : ''}${delta.toFixed(digits)}`;
}

/** Milliseconds as "12.3 ms". */
export function formatMs(ms: number | undefined | null): string {
  if (ms === undefined || ms === null || !Number.isFinite(ms)) return '–';
  return `${formatNumber(ms, ms >= 100 ? 0 : ms >= 10 ? 1 : 2)} ms`;
}

/** A timestamp as "2025-01-31 14:05" in local time. */
export function formatTimestamp(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
}

/** The last finite loss of a series. */
export function finalLoss(losses: ReadonlyArray<number | null> | undefined): number | undefined {
  if (!losses) return undefined;
  for (let i = losses.length - 1; i >= 0; i--) {
    const l = losses[i];
    if (l !== null && Number.isFinite(l)) return l;
  }
  return undefined;
}
