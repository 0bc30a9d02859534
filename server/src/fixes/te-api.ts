/**
 * The Transformer Engine API generated code uses (te.autocast(recipe=) from TE 2.9, te.fp8_autocast(fp8_recipe=)
 * before), the recipe it defines, and the fixes that migrate or repair TE API use: PL303 (deprecated API), PL304
 * (invalid recipe), PL305 (DelayedScaling under torch.compile).
 */
import type { PrecisionLensSettings } from '../../../common/settings';
import type { RecipeCall, Span } from '../analysis/ir';
import { removeArgs, renameArg, replace, type TextEdit } from './edits';
import { splitCallArgs, statementAt, statementText } from './source';
import { outcome, refuse, type FixContext, type FixEnv, type FixOutcome } from './types';
import { supportsOldTe } from '../rules/format';

/** TE "2.10.1" at or above 2.9, or undefined when the version is unknown or unparsable. */
function atLeast2_9(version: string | undefined): boolean | undefined {
  const m = version ? /^(\d+)\.(\d+)/.exec(version) : null;
  if (!m) return undefined;
  const [major, minor] = [Number(m[1]), Number(m[2])];
  return major > 2 || (major === 2 && minor >= 9);
}

/** settings.te.apiVersion, with 'auto' resolved from the interpreter's TE version (modern when unknown). */
export function resolveApi(settings: PrecisionLensSettings, env: FixEnv = {}, text?: string): 'modern' | 'legacy' {
  if (settings.te.apiVersion !== 'auto') return settings.te.apiVersion;
  const atLeast = atLeast2_9(env.teVersion);
  if (atLeast !== undefined) return atLeast ? 'modern' : 'legacy';
  // Version unknown: generated code follows the file. One that uses only the pre-2.9 names (fp8_autocast,
  // fp8_model_init, check_fp8_support) may run on an older TE, where te.autocast / is_fp8_available do not exist.
  if (text && /\b(fp8_autocast|fp8_model_init|check_fp8_support)\b/.test(text) && !/\b(te|transformer_engine\.pytorch)\s*\.\s*(autocast|quantized_model_init|is_fp8_available)\s*\(/.test(text)) return 'legacy';
  return 'modern';
}

/** `DelayedScaling/HYBRID`: how the log line names the recipe. */
export function recipeLabel(settings: PrecisionLensSettings): string {
  const { recipe, fp8Format } = settings.te;
  return recipe === 'DelayedScaling' || recipe === 'Float8CurrentScaling' ? `${recipe}/${fp8Format}` : recipe;
}

/** The recipe constructor, qualified by the module name `recipeModule` (`te_recipe`). */
export function recipeExpression(settings: PrecisionLensSettings, recipeModule: string): string {
  const { recipe, fp8Format } = settings.te;
  const fmt = `fp8_format=${recipeModule}.Format.${fp8Format}`;
  switch (recipe) {
    case 'DelayedScaling':
      // amax_history_len=16 rather than TE's 1024: the scale then follows the recent amax, which is what TE's examples use.
      return `${recipeModule}.DelayedScaling(${fmt}, amax_history_len=16, amax_compute_algo="max")`;
    case 'Float8CurrentScaling':
      return `${recipeModule}.Float8CurrentScaling(${fmt})`;
    default:
      return `${recipeModule}.${recipe}()`;
  }
}

/** `te.autocast(...)` / `te.fp8_autocast(...)` with the given keyword arguments in this API's names. */
export function autocastCall(api: 'modern' | 'legacy', tePrefix: string, args: { enabled?: string; recipe?: string }): string {
  const parts: string[] = [];
  if (args.enabled !== undefined) parts.push(`enabled=${args.enabled}`);
  if (args.recipe !== undefined) parts.push(`${api === 'modern' ? 'recipe' : 'fp8_recipe'}=${args.recipe}`);
  return api === 'modern' ? `${tePrefix}autocast(${parts.join(', ')})` : `${tePrefix}fp8_autocast(${parts.join(', ')})`;
}

const KWARG_RENAMES: Record<string, string> = { fp8_recipe: 'recipe', fp8_group: 'amax_reduction_group' };
const FUNCTION_RENAMES: Record<string, string> = { fp8_autocast: 'autocast', fp8_model_init: 'quantized_model_init' };
const RECIPE_NAMES = new Set(['DelayedScaling', 'Float8CurrentScaling', 'Float8BlockScaling', 'MXFP8BlockScaling', 'NVFP4BlockScaling', 'Format', 'Recipe']);
const PYTORCH_NAMES = new Set(['fp8_autocast', 'fp8_model_init', 'autocast', 'quantized_model_init', 'is_fp8_available']);

/** PL303: rewrites one deprecated call or import at `span` to the TE >= 2.9 API. */
export function migrateDeprecated(ctx: FixContext, span: Span): FixOutcome {
  const { text } = ctx;
  const stmt = statementAt(ctx.model, span.startOffset);
  const stmtText = stmt ? statementText(ctx.model, stmt) : '';
  if (stmt && /^(from|import)\s/.test(stmtText) && stmtText.includes('transformer_engine.pytorch.fp8')) {
    return migrateFp8Import(stmt.start, stmt.end, stmtText, stmt.indent, ctx.teKnownModern && !supportsOldTe(ctx.text));
  }
  const m = /^([A-Za-z_][\w.]*)\s*\(/.exec(text.slice(span.startOffset, span.endOffset));
  if (!m) return refuse('No automatic fix: the deprecated use is not a call or an import Precision Lens can rewrite.');
  const callee = m[1];
  const last = callee.split('.').pop()!;
  const edits: TextEdit[] = [];
  const call = splitCallArgs(text, span.startOffset + m[0].length - 1);
  const splat = call?.args.find((a) => !a.name && /^\*/.test(a.value.trim()));
  if (splat && (FUNCTION_RENAMES[last] || call?.args.some((a) => a.name && KWARG_RENAMES[a.name]))) {
    const renames = Object.entries(KWARG_RENAMES).map(([a, b]) => `${a} -> ${b}`).join(', ');
    return refuse(`No automatic fix: the call passes ${splat.value.trim()}, whose keys the new API names differently (${renames}); rename them where that dict is built, then the call.`);
  }
  if (FUNCTION_RENAMES[last]) {
    if (!callee.includes('.')) {
      return refuse(`No automatic fix: ${last} is imported by name; renaming the call would also need the import renamed (and \`autocast\` may shadow torch's). Use te.${FUNCTION_RENAMES[last]} instead.`);
    }
    const at = span.startOffset + callee.length - last.length;
    edits.push(replace(at, at + last.length, FUNCTION_RENAMES[last]));
  }
  for (const arg of call?.args ?? []) {
    if (arg.name && KWARG_RENAMES[arg.name]) edits.push(renameArg(arg, KWARG_RENAMES[arg.name]));
  }
  if (!edits.length) return refuse('No automatic fix: nothing deprecated found in this call.');
  const title = FUNCTION_RENAMES[last] ? `Use ${FUNCTION_RENAMES[last]} (Transformer Engine >= 2.9 API)` : 'Use the Transformer Engine >= 2.9 argument names';
  // The new names exist only on TE >= 2.9: batch-applied only when that is known. A file that tests the TE version
  // supports old TE on purpose: offered, never batch-applied.
  return outcome([{ id: `PL303:${callee}:${spanKey(ctx, span)}`, title, kind: 'quickfix', codes: ['PL303'], safe: ctx.teKnownModern && !supportsOldTe(ctx.text), isPreferred: true, edits }]);
}

/** `from transformer_engine.pytorch.fp8 import A, B` -> imports from the modules that define them now. */
function migrateFp8Import(start: number, end: number, stmtText: string, indent: string, safe: boolean): FixOutcome {
  const m = /^from\s+transformer_engine\.pytorch\.fp8\s+import\s+\(?([^)]*?)\)?\s*$/s.exec(stmtText);
  if (!m) {
    return refuse('No automatic fix: `import transformer_engine.pytorch.fp8` binds the whole shim module; replace its uses with transformer_engine.pytorch / transformer_engine.common.recipe by hand.');
  }
  const names = m[1].split(',').map((s) => s.replace(/#.*$/gm, '').trim()).filter(Boolean);
  const recipe = names.filter((n) => RECIPE_NAMES.has(n.split(/\s+as\s+/)[0]));
  const pytorch = names.filter((n) => PYTORCH_NAMES.has(n.split(/\s+as\s+/)[0]));
  const unknown = names.filter((n) => !recipe.includes(n) && !pytorch.includes(n));
  if (unknown.length) {
    return refuse(`No automatic fix: ${unknown.join(', ')} ${unknown.length > 1 ? 'have' : 'has'} no known home outside transformer_engine.pytorch.fp8 (on TE >= 2.9 use te.is_fp8_available() instead of check_fp8_support()).`);
  }
  const lines: string[] = [];
  if (pytorch.length) lines.push(`from transformer_engine.pytorch import ${pytorch.join(', ')}`);
  if (recipe.length) lines.push(`from transformer_engine.common.recipe import ${recipe.join(', ')}`);
  return outcome([{
    id: 'PL303:import-fp8', title: 'Import from transformer_engine.pytorch / transformer_engine.common.recipe', kind: 'quickfix',
    codes: ['PL303'], safe, isPreferred: true, edits: [replace(start, end, lines.join(`\n${indent}`))],
  }]);
}

/** A position-free key for ids: the (normalised) source text of the span. */
function spanKey(ctx: FixContext, span: Span): string {
  // The offset too: two identical calls in one file are two fixes (check --fix applies both in one round).
  return `${ctx.text.slice(span.startOffset, span.endOffset).replace(/\s+/g, ' ').slice(0, 60)}@${span.startOffset}`;
}

/** Offset of the '(' that opens the recipe call's arguments. */
function recipeOpenParen(ctx: FixContext, recipe: RecipeCall): number {
  return ctx.text.indexOf('(', recipe.span.startOffset);
}

/** PL304: Format.E5M2 alone -> Format.HYBRID, `interval=` dropped; a recipe the target GPU lacks is refused. */
export function repairRecipe(ctx: FixContext, recipe: RecipeCall, span: Span): FixOutcome {
  const call = splitCallArgs(ctx.text, recipeOpenParen(ctx, recipe));
  if (!call) return refuse('No automatic fix: the recipe call could not be read.');
  const fmt = call.args.find((a) => a.name === 'fp8_format');
  const interval = call.args.find((a) => a.name === 'interval');
  const within = (a: { start: number; end: number }) => span.startOffset <= a.end && a.start <= span.endOffset;
  const fixes = [];
  if (fmt && /\bE5M2\s*$/.test(fmt.value) && (within(fmt) || !interval)) {
    const at = fmt.start + (fmt.end - fmt.start) - (fmt.value.length - fmt.value.search(/E5M2\s*$/));
    fixes.push({
      id: `PL304:format:${spanKey(ctx, recipe.span)}`, title: 'Use Format.HYBRID (E4M3 forward, E5M2 gradients)', kind: 'quickfix' as const,
      codes: ['PL304' as const], safe: true, isPreferred: true, edits: [replace(at, at + 4, 'HYBRID')],
    });
  } else if (interval && within(interval)) {
    fixes.push({
      id: `PL304:interval:${spanKey(ctx, recipe.span)}`, title: 'Remove interval= (ignored since Transformer Engine 2.2)', kind: 'quickfix' as const,
      codes: ['PL304' as const], safe: true, isPreferred: true, edits: removeArgs(ctx.text, call, [interval]),
    });
  }
  if (!fixes.length) {
    return refuse(`No automatic fix: ${recipe.recipe} is not available on the target GPU; pick a recipe it supports (DelayedScaling or Float8CurrentScaling run on Ada, Hopper and Blackwell) in code or in precisionLens.te.recipe.`);
  }
  return outcome(fixes);
}

/** Arguments Float8CurrentScaling shares with DelayedScaling; the amax history and margin have no meaning there. */
const CURRENT_SCALING_ARGS = new Set(['fp8_format', 'fp8_dpa', 'fp8_mha']);

/** PL305: DelayedScaling(...) -> Float8CurrentScaling(fp8_format=...), importing the name where needed. */
export function replaceDelayedScaling(ctx: FixContext, recipe: RecipeCall): FixOutcome {
  const { text, ir } = ctx;
  const open = recipeOpenParen(ctx, recipe);
  const call = splitCallArgs(text, open);
  if (!call) return refuse('No automatic fix: the recipe call could not be read.');
  if (call.args.some((a) => !a.name)) return refuse('No automatic fix: DelayedScaling has positional arguments; rewrite them as keywords first.');
  const callee = text.slice(recipe.span.startOffset, open).trim();
  if (!/(^|\.)DelayedScaling$/.test(callee)) return refuse(`No automatic fix: the recipe is constructed through ${callee}.`);
  const at = recipe.span.startOffset + callee.length - 'DelayedScaling'.length;
  const edits: TextEdit[] = [replace(at, at + 'DelayedScaling'.length, 'Float8CurrentScaling')];
  edits.push(...removeArgs(text, call, call.args.filter((a) => !CURRENT_SCALING_ARGS.has(a.name!))));
  if (!callee.includes('.')) {
    const binding = ir.imports.find((b) => b.local === 'DelayedScaling');
    if (!ir.imports.some((b) => b.local === 'Float8CurrentScaling')) {
      const stmt = binding && statementAt(ctx.model, binding.span.startOffset);
      const m = stmt && /\bDelayedScaling(\s+as\s+\w+)?/.exec(statementText(ctx.model, stmt));
      if (!stmt || !m) return refuse('No automatic fix: DelayedScaling is not imported by name in this file, so Float8CurrentScaling cannot be imported next to it.');
      const end = stmt.start + m.index + m[0].length;
      edits.push(replace(end, end, ', Float8CurrentScaling'));
    }
  }
  return outcome([{
    id: `PL305:${spanKey(ctx, recipe.span)}`, title: 'Use Float8CurrentScaling (supported under torch.compile)', kind: 'quickfix',
    codes: ['PL305'], safe: false, isPreferred: true, edits,
  }]);
}
