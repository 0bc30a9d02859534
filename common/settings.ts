/**
 * Settings, declared once: package.json `contributes.configuration` mirrors these keys (a unit test checks they agree),
 * the server fetches them per resource through workspace/configuration and the CLI builds them from flags.
 */
import { isRuleCode, type RuleCode, type Severity } from './codes';

export type TeApiVersion = 'auto' | 'legacy' | 'modern';
export type RecipeName = 'DelayedScaling' | 'Float8CurrentScaling' | 'Float8BlockScaling' | 'MXFP8BlockScaling';
export type TargetGpu = 'any' | 'ampere' | 'ada' | 'hopper' | 'blackwell';

export interface PrecisionLensSettings {
  /** Per-code override: 'off' disables the rule. */
  rules: Partial<Record<RuleCode, Severity | 'off'>>;
  te: {
    /** Which Transformer Engine autocast API generated code uses. */
    apiVersion: TeApiVersion;
    /** The recipe generated code defines. */
    recipe: RecipeName;
    /** fp8_format for DelayedScaling / Float8CurrentScaling. */
    fp8Format: 'HYBRID' | 'E4M3';
  };
  /** The GPU family the code targets: recipes (PL304) and quantization formats (PL605) the target lacks are flagged. */
  targetGpu: TargetGpu;
  /** Files larger than this are not analysed (bytes). */
  maxFileSize: number;
  /** Python interpreter for the benchmark and TE version detection; empty: discovered. */
  pythonPath: string;
  /**
   * Sizes the user declares, by name (`{"hidden_size": 4096, "dim": 1024}`); a config field `config.hidden_size` is
   * matched by its field name. A list gives several sizes (presets), each checked. Filled from the
   * `precisionLens.dims` setting and from `[tool.precision-lens] dims` in pyproject.toml (the loader merges both).
   * They come first when the analysis resolves a dimension.
   */
  dims: Record<string, number | number[]>;
  /**
   * The project's FP8 fallback module: a module name (`fp8_fallback`: found in the converted file's folder or one
   * above it within the workspace folder, else created beside the first file converted) or a path relative to the
   * workspace folder (`src/utils/fp8_fallback.py`).
   */
  fallbackModule: string;
  /**
   * Tokens per training step on one GPU (micro-batch x sequence): the rows of every token-wise GEMM, used by the
   * predicted FP8 gain (docs/gain.md). 0: unknown, the prediction assumes DEFAULT_TOKENS_PER_STEP and says so.
   */
  tokensPerStep: number;
  /** "Convert all" and `check --fix` also convert layers predicted to run slower in FP8 (default: they stay BF16). */
  convertLosingLayers: boolean;
  /**
   * What only pyproject.toml's `[tool.precision-lens]` says (no editor setting): file globs, read relative to `root`,
   * the folder of that pyproject.toml. `exclude` replaces the default skipped folders, `extend-exclude` adds to them;
   * `per-file-ignores` maps a glob to codes ("*" for all). Absent when the project sets none.
   */
  project?: ProjectPaths;
}

export interface ProjectPaths {
  root: string;
  exclude?: string[];
  extendExclude: string[];
  perFileIgnores: Record<string, string[]>;
}

function projectPaths(v: unknown): ProjectPaths | undefined {
  if (!v || typeof v !== 'object') return undefined;
  const p = v as Record<string, unknown>;
  const strings = (x: unknown): string[] => (Array.isArray(x) ? x.filter((s): s is string => typeof s === 'string') : []);
  const perFileIgnores: Record<string, string[]> = {};
  if (p.perFileIgnores && typeof p.perFileIgnores === 'object') {
    for (const [k, codes] of Object.entries(p.perFileIgnores as Record<string, unknown>)) perFileIgnores[k] = strings(codes);
  }
  return {
    root: typeof p.root === 'string' ? p.root : '',
    ...(Array.isArray(p.exclude) ? { exclude: strings(p.exclude) } : {}),
    extendExclude: strings(p.extendExclude),
    perFileIgnores,
  };
}

export const SETTINGS_SECTION = 'precisionLens';

export const DEFAULT_SETTINGS: PrecisionLensSettings = {
  rules: {},
  te: { apiVersion: 'auto', recipe: 'Float8CurrentScaling', fp8Format: 'HYBRID' },
  targetGpu: 'any',
  // ~12k lines of Python, twice the largest real model file seen (timm's vision_transformer.py, 228 KB): `check` costs
  // about 2 s per MB of dense model code here and `--fix` more (README, robustness), so a file may cost 2 s at most
  // only up to about half a megabyte; larger files are not analysed (and say so) unless the user raises the limit.
  maxFileSize: 512 * 1024,
  pythonPath: '',
  dims: {},
  fallbackModule: 'fp8_fallback',
  tokensPerStep: 0,
  convertLosingLayers: false,
};

/** The token count a prediction assumes when the user has not given one: 8 sequences of 2048. */
export const DEFAULT_TOKENS_PER_STEP = 16384;

/** A module name or a relative path to a .py file, without `..`: anything else falls back to the default. */
function fallbackModuleValue(v: unknown): string {
  if (typeof v !== 'string') return DEFAULT_SETTINGS.fallbackModule;
  const t = v.trim();
  return /^[A-Za-z_]\w*$/.test(t) || (/^([A-Za-z_][\w-]*\/)*[A-Za-z_]\w*\.py$/.test(t)) ? t : DEFAULT_SETTINGS.fallbackModule;
}

/** A declared dims table (user-written: settings or pyproject.toml) with only positive integer sizes kept. */
export function resolveDims(raw: unknown): Record<string, number | number[]> {
  const out: Record<string, number | number[]> = {};
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return out;
  const size = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v > 0;
  for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
    if (!/^[A-Za-z_][\w.]*$/.test(k)) continue;
    if (size(v)) out[k] = v;
    else if (Array.isArray(v) && v.length && v.every(size)) out[k] = v.slice(0, 64);
  }
  return out;
}

/** Merges a partial (possibly malformed, user-written) settings object over the defaults. */
export function resolveSettings(raw: unknown): PrecisionLensSettings {
  const r = (raw && typeof raw === 'object' ? raw : {}) as Record<string, any>;
  const te = (r.te && typeof r.te === 'object' ? r.te : {}) as Record<string, any>;
  const pick = <T extends string>(v: unknown, allowed: readonly T[], d: T): T => (allowed.includes(v as T) ? (v as T) : d);
  const rules: PrecisionLensSettings['rules'] = {};
  if (r.rules && typeof r.rules === 'object') {
    for (const [k, v] of Object.entries(r.rules)) {
      if (isRuleCode(k) && ['error', 'warning', 'information', 'hint', 'off'].includes(v as string)) {
        (rules as Record<string, string>)[k] = v as string;
      }
    }
  }
  return {
    rules,
    te: {
      apiVersion: pick(te.apiVersion, ['auto', 'legacy', 'modern'] as const, DEFAULT_SETTINGS.te.apiVersion),
      recipe: pick(te.recipe, ['DelayedScaling', 'Float8CurrentScaling', 'Float8BlockScaling', 'MXFP8BlockScaling'] as const, DEFAULT_SETTINGS.te.recipe),
      fp8Format: pick(te.fp8Format, ['HYBRID', 'E4M3'] as const, DEFAULT_SETTINGS.te.fp8Format),
    },
    targetGpu: pick(r.targetGpu, ['any', 'ampere', 'ada', 'hopper', 'blackwell'] as const, DEFAULT_SETTINGS.targetGpu),
    maxFileSize: typeof r.maxFileSize === 'number' && r.maxFileSize > 0 ? r.maxFileSize : DEFAULT_SETTINGS.maxFileSize,
    pythonPath: typeof r.pythonPath === 'string' ? r.pythonPath : '',
    dims: resolveDims(r.dims),
    fallbackModule: fallbackModuleValue(r.fallbackModule),
    tokensPerStep: typeof r.tokensPerStep === 'number' && Number.isInteger(r.tokensPerStep) && r.tokensPerStep > 0 && r.tokensPerStep <= 1 << 24 ? r.tokensPerStep : 0,
    convertLosingLayers: r.convertLosingLayers === true,
    ...(r.project ? { project: projectPaths(r.project) } : {}),
  };
}
