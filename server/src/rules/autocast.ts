/**
 * FP8 autocast and recipe rules: PL301 backward inside the region, PL302 TE layers that never see autocast, PL303
 * deprecated TE API, PL304 invalid recipes, PL305 DelayedScaling under torch.compile.
 */
import type { RecipeCall } from '../analysis/ir';
import { fp8Layers } from '../analysis/autocast';
import type { TargetGpu } from '../../../common/settings';
import { folderOf, isWithin } from '../engine/paths';
import { asClause } from './explain';
import { supportsOldTe, TE_VERSION_CHECK } from './format';
import type { Finding, RuleContext, RuleModule, WorkspaceFacts } from './types';

/** Minimum compute capability per recipe, and the GPU families that have it (FP8-FACTS.md, "Recipes and GPUs"). */
const RECIPE_GPUS: Record<string, { families: TargetGpu[]; needs: string }> = {
  DelayedScaling: { families: ['ada', 'hopper', 'blackwell'], needs: 'SM >= 8.9' },
  Float8CurrentScaling: { families: ['ada', 'hopper', 'blackwell'], needs: 'SM >= 8.9' },
  Float8BlockScaling: { families: ['hopper', 'blackwell'], needs: 'SM >= 9.0 and CUDA >= 12.9' },
  MXFP8BlockScaling: { families: ['blackwell'], needs: 'SM 10.x (Blackwell)' },
  NVFP4BlockScaling: { families: ['blackwell'], needs: 'SM >= 10.0 (Blackwell)' },
};

export const GPU_NAMES: Record<TargetGpu, string> = { any: 'any GPU', ampere: 'Ampere (A100, RTX 3090)', ada: 'Ada (RTX 4090, L40S)', hopper: 'Hopper (H100, H200)', blackwell: 'Blackwell (B200)' };

/** TE version "2.10.1" at or above major.minor. */
export function teAtLeast(version: string | undefined, major: number, minor: number): boolean | undefined {
  const m = version ? /^(\d+)\.(\d+)/.exec(version) : null;
  if (!m) return undefined;
  const [maj, min] = [Number(m[1]), Number(m[2])];
  return maj > major || (maj === major && min >= minor);
}

function recipeFindings(recipe: RecipeCall, recipeIndex: number, ctx: RuleContext, compiled: boolean): Finding[] {
  const compileCall = ctx.ir.calls.find((c) => c.kind === 'compile');
  const out: Finding[] = [];
  const fmt = recipe.args.fp8_format;
  if (fmt && /\bE5M2\s*$/.test(fmt)) {
    out.push({
      code: 'PL304', span: recipe.argSpans.fp8_format ?? recipe.span, severity: 'error', recipeIndex,
      message: `${recipe.recipe}(fp8_format=${fmt}): TE does not train in E5M2 alone; use Format.HYBRID`,
      explanation: {
        facts: ['TE raises "Pure E5M2 training is not supported." when the recipe is used.'],
        consequence: 'E5M2 keeps range but has only 2 mantissa bits, too coarse for activations and weights.',
        fix: 'The fix sets Format.HYBRID: E4M3 in the forward pass, E5M2 for gradients.',
      },
    });
  }
  if ('interval' in recipe.args) {
    out.push({
      code: 'PL304', span: recipe.argSpans.interval ?? recipe.span, severity: 'warning', recipeIndex,
      message: `${recipe.recipe}(interval=...) has no effect since Transformer Engine 2.2; drop the argument`,
      explanation: {
        facts: ['TE 2.2 removed the interval option; TE 2.20.2 still accepts the keyword and ignores it, without a warning (checked on an H200: bench/results/h200/2026-12-02-rows/).'],
        consequence: 'Scaling factors are updated every step whatever interval says, so the code does not get what it asks for; the argument has no replacement.',
        fix: 'The fix removes the argument.',
      },
    });
  }
  const gpus = RECIPE_GPUS[recipe.recipe];
  const target = ctx.settings.targetGpu;
  if (gpus && target !== 'any' && !gpus.families.includes(target)) {
    out.push({
      code: 'PL304', span: recipe.span, severity: 'error', recipeIndex,
      message: `${recipe.recipe} needs ${gpus.needs}, which the target GPU lacks; ${target === 'ampere' ? 'Ampere has no FP8: run BF16 there' : 'use Float8CurrentScaling there'}`,
      explanation: {
        facts: [`The target GPU is ${GPU_NAMES[target]} (precisionLens.targetGpu, or target-gpu in pyproject.toml).`],
        consequence: 'TE refuses the recipe at the first autocast.',
        fix: 'DelayedScaling and Float8CurrentScaling run on every FP8 GPU (compute capability 8.9 or higher).',
      },
    });
  }
  if (recipe.recipe === 'DelayedScaling' && compiled) {
    out.push({
      code: 'PL305', span: recipe.span, severity: 'warning', recipeIndex,
      message: 'DelayedScaling fails where torch.compile traces the TE autocast; use Float8CurrentScaling',
      explanation: {
        facts: ['DelayedScaling keeps an amax history that torch.compile cannot trace.', 'TE raises "DelayedScaling is not supported under torch.compile" when te.autocast is entered while the compiler traces (fullgraph=True); TE 2.20.2 on an H200 ran it where the compiler broke the graph at the autocast.'],
        fix: 'Float8CurrentScaling uses the same formats and takes its scales from the current tensor.',
      },
      ...(compileCall ? { related: [{ span: compileCall.span, message: 'torch.compile is called here' }] } : {}),
    });
  }
  return out;
}

export const autocastRules: RuleModule = {
  codes: ['PL301', 'PL302', 'PL303', 'PL304', 'PL305'],
  check(ctx: RuleContext): Finding[] {
    const { ir, workspace, settings } = ctx;
    const findings: Finding[] = [];

    ir.autocastRegions.forEach((region, regionIndex) => {
      if (region.disabled) return;
      for (const call of region.backwardInside) {
        findings.push({
          code: 'PL301', span: call.span, severity: 'warning', regionIndex,
          message: `${shortCall(call.text)} runs inside the FP8 autocast block; move it after the with block`,
          related: [{ span: region.callSpan, message: 'the FP8 autocast block starts here' }],
          explanation: {
            facts: ["TE's docs run only the forward pass (and the loss) under autocast."],
            consequence: 'Backward uses the recipe state the forward recorded; inside the region it can reuse stale scaling and amax reductions.',
            fix: 'The fix moves backward() and what follows it in the block after the with statement.',
          },
        });
      }
    });

    // te.* layers that no FP8 autocast reaches compute in BF16/FP32: the conversion buys nothing. Only where the analysed
    // files train: a model file or library checked alone is trained (and autocast) elsewhere.
    const noFp8 = workspace.anyAutocastRegion === false && workspace.anyTraining === true && !ir.autocastRegions.some((r) => !r.disabled);
    const teLayers = fp8Layers(ir);
    if (noFp8 && teLayers.length) {
      const first = teLayers[0];
      findings.push({
        code: 'PL302', span: first.span, severity: 'warning', layerIndex: ir.layers.indexOf(first),
        message: `${teLayers.length} te.* layer${teLayers.length > 1 ? 's' : ''} but no FP8 autocast reaches them: FP8 is off; wrap the training step's forward in FP8 autocast`,
        explanation: {
          facts: ['No analysed file enters te.autocast / te.fp8_autocast / fp8_autocast_context, and the analysed files train the model.'],
          consequence: 'Outside FP8 autocast TE modules compute in BF16/FP32: the conversion buys nothing.',
          fix: '"Wrap the training step in FP8 autocast" in the training script does it (backward() stays outside; an autocast the script already has keeps its dtype, the FP8 context goes inside it).',
        },
      });
    } else if (noFp8 && workspace.anyTeLayers === true) {
      // The training script of a converted model: its step is where FP8 autocast belongs (and what --fix wraps).
      const step = ir.calls.find((c) => c.kind === 'backward');
      if (step) {
        findings.push({
          code: 'PL302', span: step.span, severity: 'warning', callIndex: ir.calls.indexOf(step),
          message: "This training step runs te.* layers without FP8 autocast: FP8 is off; wrap the step's forward in FP8 autocast",
          explanation: {
            facts: ['Analysed files build te.* layers (or the FP8 fallback\'s fp8_linear / fp8_layernorm / fp8_rmsnorm), and no analysed file enters FP8 autocast.'],
            consequence: 'Outside FP8 autocast TE modules compute in BF16/FP32: the conversion buys nothing.',
            fix: 'The fix puts the forward pass and the loss under the FP8 fallback\'s fp8_autocast_context() (BF16 autocast with TE autocast inside it where FP8 runs); backward() and the optimizer step stay outside. An autocast the script already has (`with ctx:`) keeps its dtype: the FP8 context goes inside it.',
          },
        });
      }
    }

    // Deprecated API: only once TE >= 2.9 is (or may be) in use; a user pinned to legacy keeps fp8_autocast.
    const legacy = settings.te.apiVersion === 'legacy' || teAtLeast(workspace.teVersion, 2, 9) === false;
    let versionAware: boolean | undefined; // read only when a deprecated call is there
    if (!legacy) {
      ir.calls.forEach((call, callIndex) => {
        if (call.kind !== 'te_deprecated') return;
        // The old-API path of code that tests the TE version (`if hasattr(te, "autocast"): ... else te.fp8_autocast`):
        // deliberate, and needed on TE < 2.9.
        versionAware ??= supportsOldTe(ctx.text);
        const owner = call.ownerSpan ? ctx.text.slice(call.ownerSpan.startOffset, call.ownerSpan.endOffset) : ctx.text;
        if (versionAware && TE_VERSION_CHECK.test(owner)) return;
        findings.push({
          code: 'PL303', span: call.span, severity: 'hint', callIndex,
          message: `${call.callee} is deprecated since Transformer Engine 2.9; ${asClause(shortMigration(call.callee, call.args, ir.imports.find((b) => b.local === call.callee)?.target))}`,
          explanation: {
            facts: ['TE >= 2.9 warns (DeprecationWarning) and will remove the old names.'],
            fix: migrationFor(call.callee, call.args, ir.imports.find((b) => b.local === call.callee)?.target),
          },
        });
      });
    }

    const compiled = ir.calls.some((c) => c.kind === 'compile') || compiledAround(workspace);
    ir.recipes.forEach((recipe, recipeIndex) => findings.push(...recipeFindings(recipe, recipeIndex, ctx, compiled)));
    return findings;
  },
};

/**
 * Whether a file that calls torch.compile covers this one: its folder holds this file (the training script compiles
 * the model it imports from beside it or below it). Where the paths are not known, any compile call counts.
 */
function compiledAround(workspace: WorkspaceFacts): boolean {
  if (!workspace.compileFiles || !workspace.path) return workspace.anyCompile === true;
  const file = workspace.path;
  return workspace.compileFiles.some((c) => isWithin(file, folderOf(c)));
}

/** The call's text on one line, shortened: `loss.backward()`. */
function shortCall(text: string): string {
  const one = text.replace(/\s+/g, ' ').replace(/\(\s+/g, '(').replace(/,?\s*\)/g, ')');
  return one.length <= 50 ? one : `${one.slice(0, 47)}...`;
}

/** The migration in a few words, for the message. */
function shortMigration(callee: string, args: Record<string, string>, imported?: string): string {
  const last = (imported ?? callee).split('.').pop() ?? '';
  if (last === 'fp8_autocast') return callee.includes('.') ? `use te.autocast${args.fp8_recipe !== undefined ? ' with recipe=' : ''}` : 'use autocast from transformer_engine.pytorch';
  if (last === 'fp8_model_init') return callee.includes('.') ? 'use te.quantized_model_init' : 'use quantized_model_init from transformer_engine.pytorch';
  if (/\.fp8$/.test(callee)) return 'import from transformer_engine.pytorch instead';
  return args.fp8_recipe !== undefined ? 'pass recipe= instead of fp8_recipe=' : 'use the TE >= 2.9 names';
}

/** The migration that applies to one deprecated use (TE >= 2.9 names). */
function migrationFor(callee: string, args: Record<string, string>, imported?: string): string {
  const last = (imported ?? callee).split('.').pop() ?? '';
  const renames: string[] = [];
  if (args.fp8_recipe !== undefined) renames.push('recipe= for fp8_recipe=');
  if (args.fp8_group !== undefined) renames.push('amax_reduction_group= for fp8_group=');
  const kw = renames.length ? `, with ${renames.join(' and ')}` : '';
  // Imported by name (`from transformer_engine.pytorch import fp8_autocast`): there may be no `te` in the file.
  const byName = !callee.includes('.');
  if (last === 'fp8_autocast') return byName ? `Import autocast from transformer_engine.pytorch (under another name if torch's autocast is used too) and use it${kw}.` : `Use te.autocast(...)${kw}.`;
  if (last === 'fp8_model_init') return byName ? `Import quantized_model_init from transformer_engine.pytorch and use it${kw}.` : `Use te.quantized_model_init(...)${kw}.`;
  if (/\.fp8$/.test(callee)) {
    return 'Import from transformer_engine.pytorch (autocast, quantized_model_init, is_fp8_available(return_reason=True) instead of check_fp8_support) and transformer_engine.common.recipe (recipes); internal names such as FP8GlobalStateManager are not public API: look up where your TE version defines them.';
  }
  return renames.length ? `Use ${renames.join(' and ')}.` : 'Use the Transformer Engine >= 2.9 API (te.autocast, te.quantized_model_init).';
}
