/** Types shared by the fix modules. */
import type { RuleCode } from '../../../common/codes';
import type { PrecisionLensSettings } from '../../../common/settings';
import type { ModelIR } from '../analysis/ir';
import type { TextEdit } from './edits';
import type { SourceModel } from './source';

/** One offered fix: a code action in the editor, an entry of `fixes` in the CLI's JSON, an edit set for `--fix`. */
export interface Fix {
  /** Stable across unrelated edits of the file (no offsets): tests and the idempotence check compare ids. */
  id: string;
  title: string;
  /** `quickfix` answers one diagnostic; `source` acts on the file or a selection (convert all, insert wrapper...). */
  kind: 'quickfix' | 'source';
  codes: RuleCode[];
  /** `precision-lens check --fix` may apply it unattended: the result is equivalent and needs no review. */
  safe: boolean;
  isPreferred?: boolean;
  edits: TextEdit[];
  /** Files the fix creates (the project's FP8 fallback module): in the editor an LSP CreateFile, in the CLI a write. */
  createFiles?: CreatedFile[];
  /**
   * The conversion is predicted to slow training (analysis/gain-layer.ts predictedLoss): offered in the editor, with
   * the prediction in its title, but never applied in batch (`check --fix`) unless precisionLens.convertLosingLayers.
   */
  predictedLoss?: string;
}

/** A file a fix creates, with its whole text. */
export interface CreatedFile {
  /** Absolute path. */
  path: string;
  text: string;
}

/** The project's FP8 fallback module, as the server or the CLI located it (engine/fallback-location.ts). */
export interface FallbackModule {
  /** What `from X import ...` names: `fp8_fallback`, `.fp8_fallback`, `pkg.fp8_fallback`. */
  importFrom: string;
  /** Absolute path of the module file. */
  path: string;
  /** The file is there: fixes import it; otherwise the first fix that needs it creates it. */
  exists: boolean;
  /**
   * The fallback's functions an existing module does not define (one written by an earlier version: no
   * fp8_for_compile): a fix that needs one refuses instead of writing an import that fails when the script starts.
   */
  lacks?: string[];
}

/** Facts about the user's environment that generated code depends on. */
export interface FixEnv {
  /** transformer_engine.__version__ of the selected interpreter ("2.10.0"), when known. */
  teVersion?: string;
  /** Another FP8 / quantization stack that a file importing this one uses (WorkspaceFacts.otherStack). */
  otherStack?: string;
  /** The project's fallback module; absent: an inline block in the file (outside any workspace folder, or a client
   * that cannot create files). */
  fallbackModule?: FallbackModule;
}

/**
 * A fix the user might expect but that is not offered, with the reason: a disabled code action in the editor
 * (`disabled.reason`, LSP 3.16), so Ctrl+. on a refused layer says why.
 */
export interface RefusedFix {
  /** Like Fix.id. */
  id: string;
  /** What the action would do ("Convert self.ln_f to te.LayerNorm"). */
  title: string;
  kind: 'quickfix' | 'source';
  /** Full sentences, as in FixOutcome.refusals. */
  reason: string;
}

/** Fixes for one finding, and why the ones that might be expected are not offered. */
export interface FixOutcome {
  fixes: Fix[];
  /** Full sentences, e.g. "No automatic fix: backward() is followed by `x = y` inside the block (line 12)". */
  refusals: string[];
  /** The refused actions, with titles (set by fixOutcome / sourceFixOutcome for the editor's disabled actions). */
  refused?: RefusedFix[];
}

/** Everything a fix function reads; built once per request. */
export interface FixContext {
  text: string;
  ir: ModelIR;
  settings: PrecisionLensSettings;
  model: SourceModel;
  /** The TE API generated code uses. */
  api: 'modern' | 'legacy';
  /** TE >= 2.9 is known (te.apiVersion "modern", or the interpreter's TE version): PL303's migration may be batch-applied. */
  teKnownModern: boolean;
  /** The file already defines the FP8 fallback wrapper (an inline block). */
  hasWrapper: boolean;
  /** The project's fallback module (FixEnv.fallbackModule); undefined: the inline block. */
  fallbackModule?: FallbackModule;
  /** Another FP8 / quantization stack that a file importing this one uses: no te.* conversion then. */
  otherStack?: string;
}

export function outcome(fixes: Fix[] = [], refusals: string[] = []): FixOutcome {
  return { fixes, refusals };
}

export function refuse(reason: string): FixOutcome {
  return { fixes: [], refusals: [reason] };
}
