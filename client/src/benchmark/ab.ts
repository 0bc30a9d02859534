/**
 * The A/B run ("Measure conversion", `precision-lens measure`): the user's own project as it is (`original`, BF16
 * autocast) against its converted copy (`converted`), and torchao on the original (`torchao-original`). Pure (no
 * `vscode`, no Node): the webview, the Markdown export and the unit tests read these lines.
 */
import type { BackendResult } from '../../../common/bench-events';
import type { ConversionInfo } from '../../../common/webview-messages';
import { formatNumber } from './format';

/** `fp8_gemms` of the converted arm: how many te.* GEMM modules ran, and how many of their forwards were in FP8. */
export interface Fp8Gemms {
  modules?: number;
  forwardsFp8?: number;
  forwardsTotal?: number;
}

/** The converted arm's `fp8_gemms` (kept in the result's `extra`), or undefined. */
export function fp8GemmsOf(results: readonly BackendResult[]): Fp8Gemms | undefined {
  for (const r of results) {
    const g = r.extra?.fp8_gemms;
    if (typeof g !== 'object' || g === null) continue;
    const o = g as Record<string, unknown>;
    const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
    return { modules: n(o.modules), forwardsFp8: n(o.forwards_fp8), forwardsTotal: n(o.forwards_total) };
  }
  return undefined;
}

/**
 * The FP8-forwards line: "FP8 forwards: 1,440 of 1,440 GEMM forwards of the converted model ran in FP8 (48 modules)."
 * It says whether the conversion actually ran in FP8 (a guarded layer may have fallen back to BF16 at run time).
 */
export function fp8ForwardsLine(results: readonly BackendResult[]): string | undefined {
  const g = fp8GemmsOf(results);
  if (!g) return undefined;
  const modules = g.modules !== undefined ? ` (${formatNumber(g.modules, 0)} te.* module${g.modules === 1 ? '' : 's'})` : '';
  if (g.forwardsTotal === undefined || g.forwardsFp8 === undefined) return `FP8 forwards: not counted${modules}.`;
  if (g.forwardsTotal === 0) return `FP8 forwards: the converted model ran no te.* GEMM${modules}: nothing ran in FP8.`;
  const all = g.forwardsFp8 === g.forwardsTotal;
  return `FP8 forwards: ${formatNumber(g.forwardsFp8, 0)} of ${formatNumber(g.forwardsTotal, 0)} GEMM forwards of the converted model ran in FP8${modules}${all ? '.' : ': the others fell back to BF16.'}`;
}

/** "Converted copy: 5 fixes in 2 files (fallback module fp8_fallback)." */
export function conversionLine(conversion: ConversionInfo | undefined): string | undefined {
  if (!conversion) return undefined;
  if (conversion.applied === 0) return 'Converted copy: nothing was converted, both arms ran the same code.';
  return `Converted copy: ${conversion.applied} fix${conversion.applied === 1 ? '' : 'es'} in ${conversion.files} file${conversion.files === 1 ? '' : 's'}${conversion.fallbackModule ? ` (fallback module ${conversion.fallbackModule})` : ''}.`;
}

/** The `conversion` event's fields as ConversionInfo, or undefined when it is malformed. */
export function toConversionInfo(raw: Record<string, unknown>): ConversionInfo | undefined {
  const applied = raw.applied;
  const files = raw.files;
  if (typeof applied !== 'number' || typeof files !== 'number') return undefined;
  const fixes = Array.isArray(raw.fixes) ? raw.fixes.filter((f): f is string => typeof f === 'string').slice(0, 200) : [];
  return { applied, files, fixes, ...(typeof raw.fallback_module === 'string' ? { fallbackModule: raw.fallback_module } : {}) };
}
