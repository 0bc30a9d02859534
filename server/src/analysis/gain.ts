/**
 * The predicted FP8 gain (issue 22; docs/gain.md): a layer's FP8/BF16 speed ratio from the measured Linear table that
 * bench/tools/gemm_table.py writes (schema "precision-lens/gemm-table", version 1), and a model's predicted step speedup
 * from its layers plus the measured non-GEMM time of its blocks.
 *
 * Pure: no file system, no LSP, no VS Code. The caller reads the JSON and hands it to parseGainTable. Not wired into the
 * diagnostics yet: that waits for the table measured on the H200 (no made-up table ships; the tests use
 * test/fixtures/gain/synthetic-gemm-table.json, labelled synthetic).
 *
 * Interpolation is multilinear in log space (log M, log K, log N for a Linear; log M, log H for the block table) on the
 * log of the value, so a value halfway between 512 and 8192 tokens is read at 2048. Outside the grid a coordinate is
 * clamped to the edge and the answer says so (extrapolated, and which axes). Times beyond the grid grow with the work:
 * above the largest grid value a time is scaled by coordinate / edge (the GEMMs there are compute-bound, the time
 * per FLOP flat); below the smallest it stays at the edge's (launch-bound, a floor). Ratios are clamped on both sides.
 *
 * Each backend's ratio was taken against a baseline backend of the same run, whose times are the layer's BF16 times:
 * "bf16" (eager) for the eager rows, "bf16-compiled" for the compiled torchao rows that gain_data.py --compiled merges
 * in (gemm_table.py --compile). A backend the table did not measure is "not measured" (backendStatus), never a number.
 */

export const GAIN_TABLE_SCHEMA = 'precision-lens/gemm-table';
/** The versions this code reads: 1 (device times with the host's gaps), 2 (+ host_ms, run-ahead device times, norms). */
export const GAIN_TABLE_VERSIONS = [1, 2];

export type Grid3 = (number | null)[][][];
export type Grid2 = (number | null)[][];

export interface GainBackend {
  name: string;
  available: boolean;
  /** Why not available (a missing library, no FP8 GPU). */
  reason: string | null;
  recipe: string | null;
  library: string | null;
  /** [i_m][i_k][i_n], ms, median forward + backward of one Linear (casts included). */
  totalMs?: Grid3;
  fwdMs?: Grid3;
  bwdMs?: Grid3;
  /** BF16 time / this backend's time of the same cell: > 1 faster than BF16. */
  ratio?: Grid3;
  /** [i_m][i_k][i_n] ms per layer the host spends issuing the step (version 2; absent: the host is not modelled). */
  hostMs?: Grid3;
  /** Measured with every layer in torch.compile (gemm_table.py --compile, merged by gain_data.py --compiled). */
  compiled: boolean;
  /** The backend its ratio was taken against, whose times are the layer's BF16 times: "bf16", or "bf16-compiled". */
  baseline: string;
}

/** The compiled run merged into the table (gain_data.py --compiled): its own date and versions. */
export interface CompiledRun {
  date: string;
  versions: Record<string, string | null>;
  /** How the grid was compiled: "dynamic", "per-kn" or "static" (gemm_table.py --compile-shapes). */
  shapes: string | null;
}

export interface BlockTable {
  m: number[];
  widths: number[];
  seq: number;
  vocab: number;
  /** [i_m][i_w] ms: 2 x norm + attention + GELU + 2 x residual, forward + backward. */
  nonGemmMs: Grid2;
  /** [i_m][i_w] ms: one torch LayerNorm (two are inside nonGemmMs); null in a table without it. */
  normMs: Grid2 | null;
  geluMs: Grid2;
  swigluMs: Grid2;
  lmHeadMs: Grid2;
  /** [i_m] ms: cross-entropy over M x vocab. */
  lossMs: (number | null)[];
  adamwNsPerParam: number | null;
  /** Version 2: a written-out RMSNorm (fp32 math) and TE's fused norms, per (M, width); null where not measured. */
  rmsnormEagerMs: Grid2 | null;
  teLayerNormMs: Grid2 | null;
  teRmsNormMs: Grid2 | null;
  /** Version 2: the host's ms per block for the non-GEMM work, and per step for the loss and the optimizer. */
  nonGemmHostMs: Grid2 | null;
  /** Version 2: the host's ms for one norm of each kind (torch LayerNorm, written-out RMSNorm, TE's two). */
  normHostMs: { layernorm: Grid2 | null; rmsnormEager: Grid2 | null; teLayerNorm: Grid2 | null; teRmsNorm: Grid2 | null };
  lossHostMs: (number | null)[] | null;
  adamwHostMs: number | null;
}

export interface GainTable {
  gpu: { name: string | null; capability: string | null };
  versions: Record<string, string | null>;
  date: string;
  /** true for a CPU run or a synthetic fixture: the numbers mean nothing. */
  notABenchmark: boolean;
  note: string | null;
  grid: { m: number[]; k: number[]; n: number[] };
  backends: Record<string, GainBackend>;
  block: BlockTable | null;
  /** Version 2: the host's cost per forward region (autocast enter/exit, one per step) and per layer, per backend. */
  hostModel: Record<string, { perRegionMs: number; perLayerMs: number }>;
  /** The compiled run whose backends (compiled: true) were merged in, if any. */
  compiledRun: CompiledRun | null;
}

export class GainTableError extends Error {}

// ------------------------------------------------------------------------------------------------------------ parsing

function isObj(v: unknown): v is Record<string, unknown> {
  return !!v && typeof v === 'object' && !Array.isArray(v);
}

function axis(v: unknown, what: string): number[] {
  if (!Array.isArray(v) || v.length < 1 || !v.every((x) => typeof x === 'number' && x > 0 && Number.isFinite(x))) {
    throw new GainTableError(`${what} must be a non-empty list of positive numbers`);
  }
  for (let i = 1; i < v.length; i++) {
    if (!(v[i] > v[i - 1])) throw new GainTableError(`${what} must be strictly increasing`);
  }
  return v as number[];
}

function cell(x: unknown, what: string): number | null {
  if (x === null || x === undefined) return null;
  if (typeof x !== 'number' || !Number.isFinite(x) || x <= 0) throw new GainTableError(`${what}: ${JSON.stringify(x)} is not a positive number or null`);
  return x;
}

function grid3(v: unknown, dims: [number, number, number], what: string): Grid3 {
  if (!Array.isArray(v) || v.length !== dims[0]) throw new GainTableError(`${what} must have ${dims[0]} planes (one per M)`);
  return v.map((plane, a) => {
    if (!Array.isArray(plane) || plane.length !== dims[1]) throw new GainTableError(`${what}[${a}] must have ${dims[1]} rows (one per K)`);
    return plane.map((row, b) => {
      if (!Array.isArray(row) || row.length !== dims[2]) throw new GainTableError(`${what}[${a}][${b}] must have ${dims[2]} cells (one per N)`);
      return row.map((x, c) => cell(x, `${what}[${a}][${b}][${c}]`));
    });
  });
}

function grid2(v: unknown, dims: [number, number], what: string): Grid2 {
  if (!Array.isArray(v) || v.length !== dims[0]) throw new GainTableError(`${what} must have ${dims[0]} rows (one per M)`);
  return v.map((row, a) => {
    if (!Array.isArray(row) || row.length !== dims[1]) throw new GainTableError(`${what}[${a}] must have ${dims[1]} cells (one per width)`);
    return row.map((x, b) => cell(x, `${what}[${a}][${b}]`));
  });
}

function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

/** Validates the JSON of bench/tools/gemm_table.py. Throws GainTableError saying what is wrong. */
export function parseGainTable(json: unknown): GainTable {
  if (!isObj(json)) throw new GainTableError('the gain table must be a JSON object');
  if (json.schema !== GAIN_TABLE_SCHEMA) throw new GainTableError(`not a gain table: schema is ${JSON.stringify(json.schema)}, expected "${GAIN_TABLE_SCHEMA}"`);
  if (!GAIN_TABLE_VERSIONS.includes(json.schema_version as number)) {
    throw new GainTableError(`gain table schema_version ${JSON.stringify(json.schema_version)} is not supported (this code reads ${GAIN_TABLE_VERSIONS.join(', ')})`);
  }
  if (json.incomplete === true) throw new GainTableError('the gain table is incomplete (its run stopped before the end): measure it again');
  const g = isObj(json.grid) ? json.grid : {};
  const grid = { m: axis(g.m, 'grid.m'), k: axis(g.k, 'grid.k'), n: axis(g.n, 'grid.n') };
  const dims: [number, number, number] = [grid.m.length, grid.k.length, grid.n.length];
  if (!isObj(json.backends)) throw new GainTableError('backends must be an object');
  const backends: Record<string, GainBackend> = {};
  for (const [name, raw] of Object.entries(json.backends)) {
    if (!isObj(raw)) throw new GainTableError(`backends.${name} must be an object`);
    const b: GainBackend = {
      name, available: raw.available === true, reason: str(raw.reason), recipe: str(raw.recipe), library: str(raw.library),
      compiled: raw.compiled === true, baseline: str(raw.baseline) ?? 'bf16',
    };
    if (b.available) {
      b.totalMs = grid3(raw.total_ms, dims, `backends.${name}.total_ms`);
      b.ratio = grid3(raw.ratio, dims, `backends.${name}.ratio`);
      if (raw.fwd_ms !== undefined) b.fwdMs = grid3(raw.fwd_ms, dims, `backends.${name}.fwd_ms`);
      if (raw.bwd_ms !== undefined) b.bwdMs = grid3(raw.bwd_ms, dims, `backends.${name}.bwd_ms`);
      if (raw.host_ms !== undefined) b.hostMs = grid3(raw.host_ms, dims, `backends.${name}.host_ms`);
    }
    backends[name] = b;
  }
  if (!backends.bf16?.available) throw new GainTableError('the gain table has no bf16 baseline');
  for (const b of Object.values(backends)) {
    const base = backends[b.baseline];
    if (b.available && (!base?.available || !base.totalMs)) throw new GainTableError(`backends.${b.name}.baseline "${b.baseline}" is not a measured backend of the table`);
  }
  let block: BlockTable | null = null;
  if (isObj(json.block)) {
    const r = json.block;
    const m = axis(r.m, 'block.m');
    const widths = axis(r.widths, 'block.widths');
    const d2: [number, number] = [m.length, widths.length];
    if (!Array.isArray(r.loss_ms) || r.loss_ms.length !== m.length) throw new GainTableError(`block.loss_ms must have ${m.length} cells (one per M)`);
    const adamw = isObj(r.adamw) && typeof r.adamw.ns_per_param === 'number' ? r.adamw.ns_per_param : null;
    const host = isObj(r.host_ms) ? r.host_ms : {};
    const opt2 = (v: unknown, what: string): Grid2 | null => (v === undefined ? null : grid2(v, d2, what));
    const anyCell = (g: Grid2 | null): Grid2 | null => (g && g.some((row) => row.some((x) => x !== null)) ? g : null);
    block = {
      m, widths,
      seq: typeof r.seq === 'number' ? r.seq : 0,
      vocab: typeof r.vocab === 'number' && r.vocab > 0 ? r.vocab : 0,
      nonGemmMs: grid2(r.non_gemm_ms, d2, 'block.non_gemm_ms'),
      normMs: r.norm_ms === undefined ? null : grid2(r.norm_ms, d2, 'block.norm_ms'),
      geluMs: grid2(r.gelu_ms, d2, 'block.gelu_ms'),
      swigluMs: grid2(r.swiglu_ms, d2, 'block.swiglu_ms'),
      lmHeadMs: grid2(r.lm_head_ms, d2, 'block.lm_head_ms'),
      lossMs: r.loss_ms.map((x, i) => cell(x, `block.loss_ms[${i}]`)),
      adamwNsPerParam: adamw,
      rmsnormEagerMs: anyCell(opt2(r.rmsnorm_eager_ms, 'block.rmsnorm_eager_ms')),
      teLayerNormMs: anyCell(opt2(r.te_layernorm_ms, 'block.te_layernorm_ms')),
      teRmsNormMs: anyCell(opt2(r.te_rmsnorm_ms, 'block.te_rmsnorm_ms')),
      nonGemmHostMs: anyCell(opt2(host.non_gemm_ms, 'block.host_ms.non_gemm_ms')),
      normHostMs: {
        layernorm: anyCell(opt2(host.norm_ms, 'block.host_ms.norm_ms')),
        rmsnormEager: anyCell(opt2(host.rmsnorm_eager_ms, 'block.host_ms.rmsnorm_eager_ms')),
        teLayerNorm: anyCell(opt2(host.te_layernorm_ms, 'block.host_ms.te_layernorm_ms')),
        teRmsNorm: anyCell(opt2(host.te_rmsnorm_ms, 'block.host_ms.te_rmsnorm_ms')),
      },
      lossHostMs: Array.isArray(host.loss_ms) && host.loss_ms.length === m.length ? host.loss_ms.map((x, i) => cell(x, `block.host_ms.loss_ms[${i}]`)) : null,
      adamwHostMs: isObj(r.adamw) && typeof r.adamw.host_ms === 'number' ? r.adamw.host_ms : null,
    };
  }
  const hostModel: GainTable['hostModel'] = {};
  if (isObj(json.host_model)) {
    for (const [name, v] of Object.entries(json.host_model)) {
      if (isObj(v) && typeof v.per_region_ms === 'number' && typeof v.per_layer_ms === 'number') hostModel[name] = { perRegionMs: v.per_region_ms, perLayerMs: v.per_layer_ms };
    }
  }
  const gpu = isObj(json.gpu) ? json.gpu : {};
  const versionsOf = (v: unknown): Record<string, string | null> => {
    const out: Record<string, string | null> = {};
    if (isObj(v)) for (const [k, x] of Object.entries(v)) out[k] = x === null || x === undefined ? null : String(x);
    return out;
  };
  const versions = versionsOf(json.versions);
  const cr = isObj(json.compiled_run) ? json.compiled_run : undefined;
  const compiledRun: CompiledRun | null = cr
    ? { date: str(cr.date) ?? '', versions: versionsOf(cr.versions), shapes: isObj(cr.compile) ? str(cr.compile.shapes) : null }
    : null;
  return {
    gpu: { name: str(gpu.name), capability: str(gpu.capability) },
    versions,
    date: str(json.date) ?? '',
    notABenchmark: json.not_a_benchmark === true,
    note: str(json.note),
    grid, backends, block, hostModel, compiledRun,
  };
}

// ------------------------------------------------------------------------------------------------------ interpolation

export interface Interpolated {
  /** undefined when every corner the point needs is missing (null) in the table. */
  value: number | undefined;
  /** A coordinate lay outside the grid: it was clamped (and a time scaled, see the file comment). */
  extrapolated: boolean;
  /** The axes clamped, e.g. ['M above 32768']. */
  clamped: string[];
  /** Some corners were null (failed cells); the others were re-weighted. */
  missingCorners: number;
}

interface AxisPos { lo: number; hi: number; t: number; clamped: 'below' | 'above' | null; edge: number }

function locate(ax: number[], x: number): AxisPos {
  const last = ax.length - 1;
  if (x <= ax[0]) return { lo: 0, hi: 0, t: 0, clamped: x < ax[0] ? 'below' : null, edge: ax[0] };
  if (x >= ax[last]) return { lo: last, hi: last, t: 0, clamped: x > ax[last] ? 'above' : null, edge: ax[last] };
  let i = 0;
  while (ax[i + 1] < x) i++;
  const t = (Math.log(x) - Math.log(ax[i])) / (Math.log(ax[i + 1]) - Math.log(ax[i]));
  return { lo: i, hi: i + 1, t, clamped: null, edge: x };
}

/**
 * Multilinear interpolation in log space of a positive-valued grid of any rank (values: nested arrays, index order =
 * axes order). Returns exp(sum of w_i log v_i) over the non-null corners, weights renormalised.
 */
export function interpolateLog(axes: number[][], names: string[], values: unknown, point: number[]): Interpolated {
  const pos = axes.map((ax, i) => locate(ax, point[i]));
  const clamped: string[] = [];
  pos.forEach((p, i) => {
    if (p.clamped) clamped.push(`${names[i]} ${p.clamped} ${p.clamped === 'below' ? axes[i][0] : axes[i][axes[i].length - 1]}`);
  });
  let sumW = 0;
  let sumLog = 0;
  let missing = 0;
  const rank = axes.length;
  for (let corner = 0; corner < 1 << rank; corner++) {
    let w = 1;
    let v: unknown = values;
    for (let d = 0; d < rank; d++) {
      const up = (corner >> d) & 1;
      const p = pos[d];
      if (p.lo === p.hi && up) { w = 0; break; }
      w *= up ? p.t : 1 - p.t;
      v = Array.isArray(v) ? v[up ? p.hi : p.lo] : undefined;
    }
    if (w === 0) continue;
    if (typeof v !== 'number' || !(v > 0)) { missing++; continue; }
    sumW += w;
    sumLog += w * Math.log(v);
  }
  return { value: sumW > 0 ? Math.exp(sumLog / sumW) : undefined, extrapolated: clamped.length > 0, clamped, missingCorners: missing };
}

/** A time read off a grid: beyond the largest grid value on an axis, scaled by coordinate / edge (see the file comment). */
function interpolateTime(axes: number[][], names: string[], values: unknown, point: number[]): Interpolated {
  const r = interpolateLog(axes, names, values, point);
  if (r.value === undefined) return r;
  let scale = 1;
  axes.forEach((ax, i) => { const top = ax[ax.length - 1]; if (point[i] > top) scale *= point[i] / top; });
  return { ...r, value: r.value * scale };
}

// ----------------------------------------------------------------------------------------------------- predictions

export interface LinearShape {
  /** Rows of the GEMM: tokens (batch x sequence), or the batch for a per-sample layer. */
  m: number;
  /** in_features */
  k: number;
  /** out_features */
  n: number;
}

export interface LayerGain extends LinearShape {
  backend: string;
  /** The backend's layers were measured in torch.compile, against compiled BF16 (baseline "bf16-compiled"). */
  compiled: boolean;
  /** The backend whose times bf16Ms and hostBf16Ms are: the one the ratio was taken against. */
  baseline: string;
  /** BF16 time / FP8 time of this Linear's forward + backward (casts included): > 1 gains. */
  ratio: number;
  bf16Ms: number;
  fp8Ms: number;
  /** The host's ms per layer per step issuing it (version-2 tables; undefined otherwise). */
  hostBf16Ms?: number;
  hostFp8Ms?: number;
  extrapolated: boolean;
  /** Sentences: where the table was clamped, cells that were missing. */
  notes: string[];
}

function backendOf(table: GainTable, backend: string): GainBackend {
  const b = table.backends[backend];
  if (!b) throw new GainTableError(`the gain table has no backend "${backend}" (it has: ${Object.keys(table.backends).join(', ')})`);
  if (!b.available || !b.ratio) throw new GainTableError(`backend "${backend}" was not measured: ${b.reason ?? 'no reason given'}`);
  return b;
}

export type BackendStatus =
  | { measured: true; backend: string; compiled: boolean; baseline: string }
  | { measured: false; backend: string; reason: string };

/**
 * Whether the table can predict this backend: measured (and how: compiled or eager, against which baseline), or
 * "not measured" with the reason. Never throws: the caller says "not measured" instead of a number.
 */
export function backendStatus(table: GainTable, backend: string): BackendStatus {
  const b = table.backends[backend];
  if (!b) return { measured: false, backend, reason: `not measured: the table (${table.gpu.name ?? 'GPU unknown'}, ${table.date.slice(0, 10)}) has no ${backend} rows` };
  if (!b.available || !b.ratio) return { measured: false, backend, reason: `not measured: ${b.reason ?? 'no reason given'}` };
  return { measured: true, backend, compiled: b.compiled, baseline: b.baseline };
}

const LINEAR_AXES = ['M', 'K', 'N'];

/** The predicted FP8/BF16 ratio of one Linear (forward + backward) with the named backend. Throws for an unknown or unmeasured backend. */
export function layerGain(table: GainTable, backend: string, shape: LinearShape): LayerGain {
  const b = backendOf(table, backend);
  // The BF16 time the ratio divides: the baseline the backend was measured against (compiled BF16 for compiled rows).
  const base = table.backends[b.baseline];
  const axes = [table.grid.m, table.grid.k, table.grid.n];
  const pt = [shape.m, shape.k, shape.n];
  const r = interpolateLog(axes, LINEAR_AXES, b.ratio, pt);
  const t = interpolateTime(axes, LINEAR_AXES, base.totalMs, pt);
  const notes: string[] = [];
  if (r.extrapolated) notes.push(`outside the measured grid (${r.clamped.join(', ')}): the ratio at the edge is used`);
  if (r.missingCorners || t.missingCorners) notes.push(`${Math.max(r.missingCorners, t.missingCorners)} neighbouring cell(s) failed to measure and were left out`);
  if (r.value === undefined || t.value === undefined) {
    throw new GainTableError(`no measured cell near M=${shape.m} K=${shape.k} N=${shape.n} for ${backend}`);
  }
  const hb = base.hostMs ? interpolateLog(axes, LINEAR_AXES, base.hostMs, pt).value : undefined;
  const hf = b.hostMs ? interpolateLog(axes, LINEAR_AXES, b.hostMs, pt).value : undefined;
  return {
    ...shape, backend, compiled: b.compiled, baseline: b.baseline, ratio: r.value, bf16Ms: t.value, fp8Ms: t.value / r.value,
    ...(hb !== undefined && hf !== undefined ? { hostBf16Ms: hb, hostFp8Ms: hf } : {}),
    extrapolated: r.extrapolated, notes,
  };
}

export interface ModelLayer extends LinearShape {
  name: string;
  /** Runs in FP8 with the backend (false: stays BF16, e.g. the lm-head or a layer the shape rule keeps). */
  convert: boolean;
  /** How many identical layers (e.g. one per block): default 1. */
  count?: number;
}

export interface ModelSpec {
  /** Every Linear of the model (per-sample layers at their real row count). */
  layers: ModelLayer[];
  /** Tokens per step (batch x sequence): the rows of the block's attention, norms and loss. */
  tokens: number;
  /** Transformer blocks and their width: their non-GEMM time comes from the block table. Omit for none. */
  blocks?: { count: number; width: number; activation?: 'gelu' | 'swiglu' };
  /**
   * The model's norms (the blocks' two each and any final one), when known: how BF16 computes them (torch's fused
   * LayerNorm / RMSNorm, or a written-out RMSNorm in fp32 math) and whether the conversion makes them TE's fused norm.
   * Omitted: two torch LayerNorms per block, unchanged by the conversion.
   */
  norms?: { count: number; kind: 'layernorm' | 'rmsnorm'; writtenOut: boolean; convert: boolean };
  /** The BF16 lm-head and its loss from the block table (an lm-head listed in layers instead is not added twice). */
  lmHead?: { width: number; vocab: number };
  /** Parameters the optimizer updates each step (AdamW, same in both precisions). */
  params?: number;
}

/**
 * The two phases of a training step: the blocks' forward and backward (Linears, norms, attention, activations,
 * residuals: the GPU time differs by precision, and so does the host's, TE's layers costing more to issue) and the
 * tail (the BF16 lm-head, the loss, the optimizer: the same in both).
 */
export interface StepPhases {
  blocks: { gpuBf16Ms: number; gpuFp8Ms: number; hostBf16Ms: number; hostFp8Ms: number };
  tail: { gpuMs: number; hostMs: number };
}

/**
 * How host and GPU overlap in a step. 'step': the host runs ahead of the GPU across the whole step, so a step takes
 * max(GPU, host) of its totals. 'phases': the host runs ahead only within a phase (the blocks' forward + backward,
 * host-heavy; the lm-head, loss and optimizer, GPU-heavy), so a step takes max(GPU, host) of each phase, summed.
 */
export type OverlapRule = 'step' | 'phases';

/** The rule predictStep uses: 'step' (scripts/gain-vs-measured.ts shows both against the A/B runs; docs/gain.md). */
export const STEP_OVERLAP: OverlapRule = 'step';

/** One arm's step time from its phases under an overlap rule. */
export function phaseStepMs(p: StepPhases, arm: 'bf16' | 'fp8', rule: OverlapRule): number {
  const gpu = arm === 'bf16' ? p.blocks.gpuBf16Ms : p.blocks.gpuFp8Ms;
  const host = arm === 'bf16' ? p.blocks.hostBf16Ms : p.blocks.hostFp8Ms;
  return rule === 'phases'
    ? Math.max(gpu, host) + Math.max(p.tail.gpuMs, p.tail.hostMs)
    : Math.max(gpu + p.tail.gpuMs, host + p.tail.hostMs);
}

export interface StepPrediction {
  backend: string;
  /** BF16 step time / FP8 step time: > 1 the model gains. */
  speedup: number;
  bf16StepMs: number;
  fp8StepMs: number;
  /** The Linears' share in each precision, and the time common to both (non-GEMM, lm-head + loss, optimizer). */
  gemmBf16Ms: number;
  gemmFp8Ms: number;
  restMs: number;
  rest: { nonGemmMs: number; lmHeadMs: number; lossMs: number; optimizerMs: number };
  /** The norms' time in each precision (a converted written-out RMSNorm becomes TE's fused one). */
  normsBf16Ms: number;
  normsFp8Ms: number;
  /** The host's time issuing a step in each precision, where the table has it; a step takes the larger of host and GPU. */
  hostBf16Ms?: number;
  hostFp8Ms?: number;
  /** The step's two phases with their GPU and host times, where the host is modelled (phaseStepMs). */
  phases?: StepPhases;
  /** The arm whose step the host, not the GPU, bounds. */
  hostBound: { bf16: boolean; fp8: boolean };
  layers: (LayerGain & { name: string; convert: boolean; count: number })[];
  /** Layers converted, and those converted that are predicted to lose (ratio < 1). */
  converted: number;
  losing: string[];
  extrapolated: boolean;
  notes: string[];
  table: { gpu: string | null; date: string; notABenchmark: boolean };
}

/**
 * The predicted step speedup of a model with the named backend:
 *   T_bf16 = sum_l count_l * t_l + R,   T_fp8 = sum_l count_l * (convert_l ? t_l / ratio_l : t_l) + R,
 *   R = blocks * non-GEMM(tokens, width) + lm-head(tokens, width, vocab) + loss(tokens, vocab) + params * AdamW ns/param,
 *   speedup = T_bf16 / T_fp8,
 * where t_l is the measured BF16 time of layer l's Linear (forward + backward) and ratio_l its FP8 ratio (casts included).
 */
export function predictStep(table: GainTable, backend: string, spec: ModelSpec): StepPrediction {
  const measured = backendOf(table, backend);
  const notes: string[] = [];
  if (measured.compiled && (spec.blocks || spec.lmHead || spec.params)) {
    notes.push('the Linears are measured compiled (against compiled BF16); attention, norms, activations, lm-head, loss and optimizer are the eager BF16 measurements, which a compiled model runs faster: the step speedup is on the low side');
  }
  let extrapolated = false;
  let gemmBf16 = 0;
  let gemmFp8 = 0;
  let converted = 0;
  const losing: string[] = [];
  const layers = spec.layers.map((l) => {
    const count = l.count ?? 1;
    const g = layerGain(table, backend, l);
    gemmBf16 += count * g.bf16Ms;
    gemmFp8 += count * (l.convert ? g.fp8Ms : g.bf16Ms);
    if (l.convert) {
      converted += count;
      if (g.ratio < 1) losing.push(l.name);
    }
    if (g.extrapolated) extrapolated = true;
    for (const s of g.notes) notes.push(`${l.name}: ${s}`);
    return { ...g, name: l.name, convert: l.convert, count };
  });
  const rest = { nonGemmMs: 0, lmHeadMs: 0, lossMs: 0, optimizerMs: 0 };
  let normsBf16 = 0;
  let normsFp8 = 0;
  // The host's time for the blocks' non-GEMM work (hostRest) and for the tail: the loss and the optimizer (hostTail).
  let hostRest: number | undefined;
  let hostTail = 0;
  // The norms' host cost beyond the torch LayerNorms the block's host time already holds, in each precision.
  let normHostBf16 = 0;
  let normHostFp8 = 0;
  const blk = table.block;
  const needsBlock = !!spec.blocks || !!spec.lmHead;
  if (needsBlock && !blk) throw new GainTableError('the gain table has no block table (non-GEMM time): measured without it');
  if (blk && spec.blocks && spec.blocks.count > 0) {
    const axes = [blk.m, blk.widths];
    const names2 = ['tokens', 'width'];
    const pt = [spec.tokens, spec.blocks.width];
    const at = (g: Grid2 | null): number | undefined => (g ? interpolateTime(axes, names2, g, pt).value : undefined);
    const ng = interpolateTime(axes, names2, blk.nonGemmMs, pt);
    let per = ng.value;
    if (per !== undefined && spec.blocks.activation === 'swiglu') {
      const ge = at(blk.geluMs);
      const sw = at(blk.swigluMs);
      if (ge !== undefined && sw !== undefined) per = per - ge + sw;
    }
    if (per === undefined) throw new GainTableError(`no non-GEMM time measured near ${spec.tokens} tokens at width ${spec.blocks.width}`);
    if (spec.norms) {
      // The block's two LayerNorms come out of the non-GEMM time; the model's own norms go in, in each precision.
      const torchNorm = at(blk.normMs) ?? 0;
      per -= 2 * torchNorm;
      const bf16Norm = spec.norms.writtenOut ? at(blk.rmsnormEagerMs) : torchNorm;
      const teNorm = at(spec.norms.kind === 'rmsnorm' ? blk.teRmsNormMs : blk.teLayerNormMs);
      if (bf16Norm === undefined) notes.push('no written-out RMSNorm time in the table: torch\'s fused norm time is used');
      normsBf16 = spec.norms.count * (bf16Norm ?? torchNorm);
      normsFp8 = spec.norms.convert && teNorm !== undefined ? spec.norms.count * teNorm : normsBf16;
      if (spec.norms.convert && teNorm === undefined) notes.push('no TE norm time in the table: converted norms are counted at their BF16 time');
    }
    rest.nonGemmMs = spec.blocks.count * per;
    if (ng.extrapolated) { extrapolated = true; notes.push(`block non-GEMM time: outside the measured grid (${ng.clamped.join(', ')})`); }
    if (blk.nonGemmHostMs) {
      // The table times each of the block's 6 non-GEMM parts (2 norms, attention, activation, 2 residual adds) in a
      // forward region of its own; a block runs them inside the step's one region: 6 region costs come off.
      const h = interpolateLog(axes, names2, blk.nonGemmHostMs, pt).value;
      const region = table.hostModel.bf16?.perRegionMs ?? 0;
      if (h !== undefined) hostRest = spec.blocks.count * Math.max(h - 6 * region, 0.1 * h);
      const nh = blk.normHostMs;
      const hAt = (g: Grid2 | null): number | undefined => (g ? interpolateLog(axes, names2, g, pt).value : undefined);
      const torchH = hAt(nh.layernorm);
      if (spec.norms && torchH !== undefined) {
        const bf16H = spec.norms.writtenOut ? hAt(nh.rmsnormEager) ?? torchH : torchH;
        const teH = hAt(spec.norms.kind === 'rmsnorm' ? nh.teRmsNorm : nh.teLayerNorm);
        const extra = spec.norms.count - 2 * spec.blocks.count;  // a final norm the blocks' time does not hold
        normHostBf16 = spec.norms.count * bf16H - (spec.norms.count - extra) * torchH;
        normHostFp8 = spec.norms.convert && teH !== undefined ? spec.norms.count * teH - (spec.norms.count - extra) * torchH : normHostBf16;
      }
    }
  }
  if (blk && spec.lmHead) {
    const axes = [blk.m, blk.widths];
    const h = interpolateTime(axes, ['tokens', 'width'], blk.lmHeadMs, [spec.tokens, spec.lmHead.width]);
    const loss = interpolateTime([blk.m], ['tokens'], blk.lossMs, [spec.tokens]);
    const vscale = blk.vocab > 0 ? spec.lmHead.vocab / blk.vocab : 1;
    if (h.value === undefined || loss.value === undefined) throw new GainTableError(`no lm-head or loss time measured near ${spec.tokens} tokens`);
    rest.lmHeadMs = h.value * vscale;
    rest.lossMs = loss.value * vscale;
    if (h.extrapolated || loss.extrapolated) { extrapolated = true; notes.push(`lm-head and loss: outside the measured grid (${[...h.clamped, ...loss.clamped].join(', ')})`); }
    if (hostRest !== undefined && blk.lossHostMs) hostTail += interpolateLog([blk.m], ['tokens'], blk.lossHostMs, [spec.tokens]).value ?? 0;
  }
  if (spec.params && spec.params > 0) {
    if (blk?.adamwNsPerParam) rest.optimizerMs = spec.params * blk.adamwNsPerParam * 1e-6;
    else notes.push('no AdamW time in the table: the optimizer step is left out');
    if (hostRest !== undefined && blk?.adamwHostMs) hostTail += blk.adamwHostMs;
  }
  const restMs = rest.nonGemmMs + rest.lmHeadMs + rest.lossMs + rest.optimizerMs;
  const tailGpu = rest.lmHeadMs + rest.lossMs + rest.optimizerMs;
  const gpuBf16 = gemmBf16 + normsBf16 + restMs;
  const gpuFp8 = gemmFp8 + normsFp8 + restMs;
  // The host: every layer's issue cost (TE's layers cost more to issue than torch's) plus the rest's. Only where the
  // table measured it for every layer.
  let hostBf16: number | undefined;
  let hostFp8: number | undefined;
  let phases: StepPhases | undefined;
  if (hostRest !== undefined && layers.every((l) => l.hostBf16Ms !== undefined)) {
    const blocksBf16 = hostRest + normHostBf16 + layers.reduce((a, l) => a + l.count * l.hostBf16Ms!, 0);
    const blocksFp8 = hostRest + normHostFp8 + layers.reduce((a, l) => a + l.count * (l.convert ? l.hostFp8Ms! : l.hostBf16Ms!), 0);
    hostBf16 = blocksBf16 + hostTail;
    hostFp8 = blocksFp8 + hostTail;
    phases = {
      blocks: { gpuBf16Ms: gpuBf16 - tailGpu, gpuFp8Ms: gpuFp8 - tailGpu, hostBf16Ms: blocksBf16, hostFp8Ms: blocksFp8 },
      tail: { gpuMs: tailGpu, hostMs: hostTail },
    };
  }
  // A step takes the larger of host and GPU over the whole step (the host runs ahead of the GPU): STEP_OVERLAP, and
  // docs/gain.md for the per-phase rule that was tried against the A/B runs and not adopted.
  const bf16StepMs = phases ? phaseStepMs(phases, 'bf16', STEP_OVERLAP) : gpuBf16;
  const fp8StepMs = phases ? phaseStepMs(phases, 'fp8', STEP_OVERLAP) : gpuFp8;
  const hostBound = { bf16: (hostBf16 ?? 0) > gpuBf16, fp8: (hostFp8 ?? 0) > gpuFp8 };
  if (hostBound.fp8) notes.push(`launch-bound in FP8: issuing the step takes the host about ${hostFp8!.toFixed(0)} ms, the GPU's work ${gpuFp8.toFixed(0)} ms`);
  if (table.notABenchmark) notes.push(`the table is not a benchmark (${table.note ?? 'CPU or synthetic'}): the prediction means nothing`);
  return {
    backend, speedup: fp8StepMs > 0 ? bf16StepMs / fp8StepMs : 1, bf16StepMs, fp8StepMs,
    gemmBf16Ms: gemmBf16, gemmFp8Ms: gemmFp8, restMs, rest, normsBf16Ms: normsBf16, normsFp8Ms: normsFp8,
    ...(hostBf16 !== undefined ? { hostBf16Ms: hostBf16, hostFp8Ms: hostFp8 } : {}), ...(phases ? { phases } : {}), hostBound,
    layers, converted, losing, extrapolated, notes,
    table: { gpu: table.gpu.name, date: table.date, notABenchmark: table.notABenchmark },
  };
}

/** "about 1.8x" / "FP8 loses here: about 0.9x" / "about even (1.02x)": within +-margin of 1 is even. */
export function describeRatio(ratio: number, margin = 0.03): string {
  const x = `${ratio.toFixed(ratio >= 10 ? 0 : ratio < 1 ? 2 : 1)}x`;
  if (Math.abs(ratio - 1) <= margin) return `about even (${ratio.toFixed(2)}x)`;
  return ratio < 1 ? `FP8 loses here: about ${x}` : `about ${x}`;
}
