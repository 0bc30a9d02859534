import type { RuleCode, Severity } from '../../../common/codes';
import type { PrecisionLensSettings } from '../../../common/settings';
import type { ModelIR, Span } from '../analysis/ir';

/** What is known beyond this one file (the workspace in the editor, the set of inputs in the CLI). */
export interface WorkspaceFacts {
  /** Whether any analysed file has an FP8 autocast region; undefined when unknown (then PL302 stays quiet). */
  anyAutocastRegion?: boolean;
  /**
   * Whether any analysed file trains (backward(), an optimizer step, a trainer's fit): PL302 speaks only then, since
   * a model file linted alone is trained elsewhere. Undefined when unknown (PL302 stays quiet).
   */
  anyTraining?: boolean;
  /**
   * For the file being checked: another analysed file that imports it converts or quantizes the model with another
   * stack (`torchao convert_to_float8_training`, accelerate FP8, bitsandbytes / QLoRA): what it is. te.* conversions
   * are then not suggested (one stack at a time). Set per file from `stackImports` (see engine.stackFor).
   */
  otherStack?: string;
  /** Module names (`model`, `pkg.model`) imported by files that use another stack -> that stack. */
  stackImports?: Record<string, string>;
  /** Whether any analysed file calls torch.compile. */
  anyCompile?: boolean;
  /** TE version of the selected interpreter, if known ("2.10.0"). */
  teVersion?: string;
}

export interface RuleContext {
  ir: ModelIR;
  text: string;
  settings: PrecisionLensSettings;
  workspace: WorkspaceFacts;
}

/** One problem found by a rule. Severity is the rule's default; the engine applies settings. */
export interface Finding {
  code: RuleCode;
  span: Span;
  message: string;
  severity: Severity;
  /** Index into ir.layers when the finding is about one layer (fixes use it). */
  layerIndex?: number;
  /** Index into ir.autocastRegions, ir.recipes or ir.calls, per rule. */
  regionIndex?: number;
  recipeIndex?: number;
  callIndex?: number;
  /** For a finding about a whole-model FP8 conversion (ir.fp8Conversions). */
  conversionIndex?: number;
}

export interface RuleModule {
  /** The codes this module can emit. */
  codes: readonly RuleCode[];
  check(ctx: RuleContext): Finding[];
}
