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
  /**
   * Where known, for a bare module name of stackImports (`model`), the folders of the files that import it: the
   * model.py of another folder (a monorepo's other project) is not the one they import.
   */
  stackDirs?: Record<string, string[]>;
  /** Whether any analysed file builds te.* layers (directly or through the FP8 fallback's factories). */
  anyTeLayers?: boolean;
  /**
   * Where known, the paths of the files that build te.* layers: PL306 asks whether one is in the training script's
   * folder (or below it) or imported by it, so a te.* example elsewhere in a monorepo does not silence it.
   */
  teFiles?: string[];
  /**
   * Whether a torch.nn.Linear of the analysed files is predicted to gain from FP8 (false: the files build such layers
   * and FP8 slows every one down; undefined: no file builds any, the model is elsewhere).
   */
  anyFp8Gains?: boolean;
  /**
   * Where known, the paths of the files that build Linears FP8 could take, split by whether one of them is predicted
   * to gain (`fp8GainFiles`) or none is (`fp8LoseFiles`): PL306 reads those in reach of the training script.
   */
  fp8GainFiles?: string[];
  fp8LoseFiles?: string[];
  /** Whether any analysed file calls torch.compile. */
  anyCompile?: boolean;
  /**
   * Where known, the paths of the files that call torch.compile: PL305 counts those whose folder holds the recipe's
   * file (the script that compiles the model it imports), not a compiling script of another project of a monorepo.
   */
  compileFiles?: string[];
  /**
   * Where known, the files that turn torchao's float8 all-gather on, that shard with FSDP1, and that call
   * precompute_float8_dynamic_scale_for_fsdp: PL702 / PL703 read those in reach of the file (its folder, the modules it
   * imports) when the config, the sharding and the training step are in different files.
   */
  allGatherFiles?: string[];
  fsdp1Files?: string[];
  precomputeFiles?: string[];
  /** TE version of the selected interpreter, if known ("2.10.0"). */
  teVersion?: string;
  /** The file being checked (factsForFile sets it): per-file-ignores read it. */
  path?: string;
}

export interface RuleContext {
  ir: ModelIR;
  text: string;
  settings: PrecisionLensSettings;
  workspace: WorkspaceFacts;
}

/** A piece of evidence for a finding, with its location: the tie statement, the config default, the forward return. */
export interface Evidence {
  span: Span;
  /** Short, e.g. "ties lm_head.weight to transformer.wte.weight". */
  message: string;
}

/**
 * The long form of a finding, shown in the hover card and kept in the CLI's JSON (`explanation`): the message stays one
 * short sentence. Each part is made of full sentences, and no sentence appears twice (in the message or here).
 */
export interface Explanation {
  /** What the analysis found: dimensions and their sources, role evidence, the verdict's reasons. */
  facts: string[];
  /** What happens if nothing is done, or what the change buys. */
  consequence?: string;
  /** What the offered fix does, or what to do by hand. */
  fix?: string;
}

/**
 * One problem found by a rule. Severity is the rule's default; the engine applies settings.
 * `message` is one sentence of about 120 characters at most: the verdict and the action
 * (`self.c_attn: nn.Linear 768->2304 can run in FP8 as te.Linear`); the rest goes to `related` and `explanation`.
 */
export interface Finding {
  code: RuleCode;
  span: Span;
  message: string;
  severity: Severity;
  /** Evidence elsewhere in the file, shown as LSP relatedInformation. */
  related?: Evidence[];
  /** The explanation for the hover card and the JSON output. */
  explanation?: Explanation;
  /** Index into ir.layers when the finding is about one layer (fixes use it). */
  layerIndex?: number;
  /** Index into ir.autocastRegions, ir.recipes or ir.calls, per rule. */
  regionIndex?: number;
  recipeIndex?: number;
  callIndex?: number;
  /** For a finding about a whole-model FP8 conversion (ir.fp8Conversions). */
  conversionIndex?: number;
  /** For PL001 (unused-noqa): the edit that removes the unused codes (or the whole comment). */
  suppressionEdit?: { startOffset: number; endOffset: number; newText: string };
  /** For a PL6xx finding: index into ir.ptq.quantizeCalls. */
  ptqIndex?: number;
  /** A conversion finding whose layer FP8 is predicted to slow down (analysis/gain-layer.ts): batch fixes leave it. */
  predictedLoss?: boolean;
}

export interface RuleModule {
  /** The codes this module can emit. */
  codes: readonly RuleCode[];
  check(ctx: RuleContext): Finding[];
}
