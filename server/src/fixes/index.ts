/**
 * Fixes: pure functions from (document text, model IR, finding, settings) to text edits, shared by the language
 * server (code actions) and the CLI (`check --fix`, the `fixes` titles in its JSON). Nothing here parses, reads files
 * or knows about LSP.
 *
 * - `fixesForFinding` / `fixOutcome`: the quick fixes for one finding, and (outcome) why an expected fix is not
 *   offered, for the diagnostic message.
 * - `sourceFixes`: file- and selection-level actions (convert all in a class or the file, insert the FP8 fallback
 *   wrapper, wrap the training step in FP8 autocast).
 * - `applyEdits` / `combineFixes`: apply one fix, or as many compatible fixes as possible, to the text.
 */
import type { PrecisionLensSettings } from '../../../common/settings';
import type { Layer, ModelIR } from '../analysis/ir';
import type { Finding } from '../rules/types';
import { findTrainingSteps, fp8ContextHeader, moveBackwardOut, nestInUserAutocast, selectedStatements, userAutocastSteps, wrapStatements } from './autocast';
import { loadNonStrict } from './checkpoint';
import { fp8ForCompile } from './compiled';
import { teAttention } from './attention';
import { allGatherOff, precomputeAfterStep, teCheckpoint } from './scale';
import { conversionArgumentRefusal, conversionFix, convertAllFix, fusionFix } from './convert';
import { findFusions } from '../analysis/fusion';
import { applyEdits, EditSet, type TextEdit } from './edits';
import { filterHeadFromConversion, keepLayerInBf16 } from './head';
import { eol } from './indent';
import { pythonSource } from '../engine/lines';
import { scanSource, statementText, type SourceModel, type Statement } from './source';
import { teAtLeast } from '../rules/autocast';
import { migrateDeprecated, repairRecipe, replaceDelayedScaling, resolveApi } from './te-api';
import { ptqFindingOutcome, ptqFix } from './ptq';
import { outcome, refuse, type FallbackModule, type Fix, type FixContext, type FixEnv, type FixOutcome, type RefusedFix } from './types';
import { CONTEXT_FACTORY } from './fallback-source';
import { hasWrapper, planWrapper, wrapperRefusal } from './wrapper';

export type { CreatedFile, FallbackModule, Fix, FixEnv, FixOutcome, RefusedFix } from './types';
export type { TextEdit } from './edits';
export { applyEdits, editsConflict } from './edits';
export { WRAPPER_MARKER } from './wrapper';

/** The last context built: the CLI and a code-action request ask for the fixes of many findings of one analysis. */
let lastContext: { raw: string; ctx: FixContext; teVersion?: string; fallbackModule?: FallbackModule } | undefined;

/** How often fixContext read its text as Python and compared it with the last context's (a test counts them). */
export const fixContextStats = { prepared: 0 };

/**
 * Builds the shared context (the statement scan of the whole file is its costly part); reused while the text, the IR
 * and the settings are the same objects, so asking for the fixes of every finding stays linear in the file size.
 */
export function fixContext(raw: string, ir: ModelIR, settings: PrecisionLensSettings, env: FixEnv = {}): FixContext {
  const last = lastContext;
  const same = (l: NonNullable<typeof last>): boolean => l.ctx.ir === ir && l.ctx.settings === settings && l.teVersion === env.teVersion
    && l.ctx.otherStack === env.otherStack && sameModule(l.fallbackModule, env.fallbackModule);
  // The text the context was last asked with: the same string object for every finding, compared at once. (A CR-only
  // file's Python text is a converted copy: compared per finding, two equal copies cost a full comparison each time,
  // 0.5 s of a 474 KB file's `check`.)
  if (last && last.raw === raw && same(last)) return last.ctx;
  fixContextStats.prepared++;
  // The fixes read the text as Python and the analysis do (a lone \r ends a line); same length, so their edits apply
  // to the text as it is.
  const text = asPython(raw);
  if (last && last.ctx.text === text && same(last)) {
    last.raw = raw;
    return last.ctx;
  }
  // The statement scan is the costly part (~50 ms for 20k lines): made on first use, so a check that needs only the
  // arguments (argumentRefusal, on the analysis path) never pays for it.
  let model: SourceModel | undefined;
  const ctx: FixContext = {
    text, ir, settings, api: resolveApi(settings, env, text), hasWrapper: hasWrapper(text),
    teKnownModern: settings.te.apiVersion === 'modern' || (settings.te.apiVersion === 'auto' && teAtLeast(env.teVersion, 2, 9) === true),
    get model(): SourceModel { return (model ??= scanSource(text)); },
  };
  if (env.otherStack) ctx.otherStack = env.otherStack;
  // A file with an inline block keeps it: the block is its FP8 state, a module beside it would be a second one.
  if (env.fallbackModule && !ctx.hasWrapper) ctx.fallbackModule = env.fallbackModule;
  lastContext = { raw, ctx, teVersion: env.teVersion, fallbackModule: env.fallbackModule };
  return ctx;
}

let lastSource: { raw: string; text: string } | undefined;
function asPython(raw: string): string {
  if (lastSource?.raw !== raw) lastSource = { raw, text: pythonSource(raw) };
  return lastSource.text;
}

function sameModule(a?: FallbackModule, b?: FallbackModule): boolean {
  return a === b || (!!a && !!b && a.path === b.path && a.importFrom === b.importFrom && a.exists === b.exists);
}

/** Generated text uses '\n'; a CRLF file gets CRLF. */
function withFileEol(text: string, fixes: Fix[]): Fix[] {
  if (eol(text) === '\n') return fixes;
  return fixes.map((f) => ({ ...f, edits: f.edits.map(crlfEdit) }));
}

/** An edit in CRLF, once per edit object (the fallback's shared edits come with every conversion of the file). */
const crlfEdits = new WeakMap<TextEdit, TextEdit>();
function crlfEdit(e: TextEdit): TextEdit {
  let out = crlfEdits.get(e);
  if (!out) crlfEdits.set(e, out = { ...e, newText: e.newText.replace(/\r?\n/g, '\r\n') });
  return out;
}

/** The quick fixes for one finding, with the reasons for any fix the user might expect but does not get. */
export function fixOutcome(text: string, ir: ModelIR, finding: Finding, settings: PrecisionLensSettings, env?: FixEnv): FixOutcome {
  const ctx = fixContext(text, ir, settings, env);
  const result = outcomeFor(ctx, finding);
  const refused: RefusedFix[] = !result.fixes.length && result.refusals.length
    ? [{ id: `refused:${finding.code}:${finding.span.startLine}`, title: refusedTitle(ir, finding), kind: 'quickfix', reason: result.refusals.join(' ') }]
    : [];
  return { fixes: withFileEol(text, result.fixes), refusals: result.refusals, refused };
}

/** What the refused quick fix would have done, as the title of its disabled code action. */
export function refusedTitle(ir: ModelIR, finding: Finding): string {
  const layer = finding.layerIndex !== undefined ? ir.layers[finding.layerIndex] : undefined;
  const label = layer ? layer.name || layer.constructor : undefined;
  switch (finding.code) {
    case 'PL101': case 'PL102': case 'PL103': case 'PL106': case 'PL110':
      return `Convert ${label ?? 'the layer'} to ${layer?.teEquivalent ?? 'te.*'}`;
    case 'PL104': return `Fuse ${label ?? 'the norm'} and its Linear into te.LayerNormLinear`;
    case 'PL107': return 'Run the attention in TE\'s fused kernel (fp8_attention)';
    case 'PL701': return 'Recompute in FP8 with TE\'s checkpoint (fp8_checkpoint)';
    case 'PL702': return 'Turn float8 all-gather off (FSDP1 cannot run it)';
    case 'PL703': return 'Precompute the float8 scales after the optimizer step';
    case 'PL105': return `Fuse the MLP block of ${label ?? 'the norm'} into te.LayerNormMLP`;
    case 'PL201': case 'PL202': return label ? `Keep ${label} in BF16` : 'Keep the lm-head and the embedding in BF16';
    case 'PL301': return 'Move backward() out of the FP8 autocast block';
    case 'PL302': return 'Wrap the training step in FP8 autocast';
    case 'PL303': return 'Migrate to the Transformer Engine >= 2.9 API';
    case 'PL304': return 'Repair the FP8 recipe';
    case 'PL305': return 'Use Float8CurrentScaling';
    case 'PL306': return 'Compile the model with torchao FP8 (fp8_for_compile)';
    case 'PL401': return 'Guard FP8 with a capability check';
    case 'PL402': return 'Log the precision mode';
    case 'PL501': return 'Load the checkpoint with strict=False';
    case 'PL502': return 'Keep the parameters in FP32';
    case 'PL601': return label ? `Keep ${label} out of the FP8 quantization` : 'Keep the lm-head out of the FP8 quantization';
    case 'PL602': return 'Calibrate the static FP8 scales (forward_loop)';
    case 'PL603': return 'Calibrate on 512-1024 samples';
    case 'PL604': return 'Use E4M3 for inference';
    case 'PL605': return 'Use a format the target GPU runs';
    case 'PL606': return 'Save with mto.save (keeps the quantizer state)';
    case 'PL001': return 'Remove unused suppression';
    case 'PL002': return 'Correct the syntax error';
  }
}

/** The quick fixes for one finding (see fixOutcome for the refusals). */
export function fixesForFinding(text: string, ir: ModelIR, finding: Finding, settings: PrecisionLensSettings, env?: FixEnv): Fix[] {
  return fixOutcome(text, ir, finding, settings, env).fixes;
}

/**
 * Why the conversion of a layer the analysis calls convertible is still refused for its arguments as written
 * (`bias=config.bias`: te.LayerNorm takes no bias flag, *args), or undefined. Cheap: it reads the call only.
 */
export function argumentRefusal(text: string, ir: ModelIR, layer: Layer, settings: PrecisionLensSettings, env?: FixEnv): string | undefined {
  return conversionArgumentRefusal(fixContext(text, ir, settings, env), layer);
}

/** Why no fix is offered for this finding (undefined when one is), for the diagnostic message or hover. */
export function explainRefusal(text: string, ir: ModelIR, finding: Finding, settings: PrecisionLensSettings, env?: FixEnv): string | undefined {
  const { fixes, refusals } = fixOutcome(text, ir, finding, settings, env);
  return fixes.length || !refusals.length ? undefined : refusals.join(' ');
}

function outcomeFor(ctx: FixContext, finding: Finding): FixOutcome {
  const { ir } = ctx;
  const layer = finding.layerIndex !== undefined ? ir.layers[finding.layerIndex] : undefined;
  const recipe = finding.recipeIndex !== undefined ? ir.recipes[finding.recipeIndex] : undefined;
  const region = finding.regionIndex !== undefined ? ir.autocastRegions[finding.regionIndex] : undefined;
  const call = finding.callIndex !== undefined ? ir.calls[finding.callIndex] : undefined;
  switch (finding.code) {
    case 'PL101':
    case 'PL102':
    case 'PL103':
    case 'PL106': {
      if (!layer) return refuse('No automatic fix: the finding names no layer.');
      const { fix, refusal } = conversionFix(ctx, layer, finding.code);
      return fix ? outcome([fix]) : refuse(refusal!);
    }
    case 'PL201':
    case 'PL202':
      if (layer) return keepLayerInBf16(ctx, layer, finding.code);
      if (finding.code === 'PL201' && finding.callIndex !== undefined && ir.fp8Conversions[finding.callIndex]) {
        return filterHeadFromConversion(ctx, ir.fp8Conversions[finding.callIndex]);
      }
      return refuse('No automatic fix: remove the float8 cast of the embedding (or exclude it from the converter) by hand.');
    case 'PL301':
      return region ? moveBackwardOut(ctx, region) : refuse('No automatic fix: the autocast region is unknown.');
    case 'PL303':
      return migrateDeprecated(ctx, call?.span ?? finding.span);
    case 'PL304':
      return recipe ? repairRecipe(ctx, recipe, finding.span) : refuse('No automatic fix: the recipe call is unknown.');
    case 'PL305':
      return recipe ? replaceDelayedScaling(ctx, recipe) : refuse('No automatic fix: the recipe call is unknown.');
    case 'PL306':
      return call ? fp8ForCompile(ctx, call) : refuse('No automatic fix: the torch.compile call is unknown.');
    case 'PL401':
      if (finding.conversionIndex !== undefined) {
        return refuse('No automatic fix: guard the conversion yourself (if torch.cuda.get_device_capability() >= (8, 9): convert, else train in BF16) and log the mode; the FP8 fallback wrapper is for Transformer Engine.');
      }
      return wrapperOutcome(ctx, 'PL401');
    case 'PL501':
      return call ? loadNonStrict(ctx, call) : refuse('No automatic fix: the load_state_dict call is unknown.');
    case 'PL502':
      return refuse('No automatic fix: keep the parameters in FP32 (drop the .half()/.to(bfloat16) before the optimizer) and train under autocast; where the cast belongs depends on the script.');
    case 'PL104':
    case 'PL105': {
      const fusion = findFusions(ctx.ir, ctx.text).find((f) => f.norm === finding.layerIndex);
      if (!fusion) return refuse('No automatic fix: the norm and the Linear it feeds were not found again.');
      const fused = fusionFix(ctx, fusion, finding.code);
      return fused.fix ? outcome([fused.fix]) : refuse(fused.refusal!);
    }
    case 'PL107':
      return call ? teAttention(ctx, call) : refuse('No automatic fix: the attention call is unknown.');
    case 'PL701':
      return call ? teCheckpoint(ctx, call) : refuse('No automatic fix: the checkpoint call is unknown.');
    case 'PL702':
      return call ? allGatherOff(ctx, call) : refuse('No automatic fix: the config call is unknown.');
    case 'PL703':
      return call ? precomputeAfterStep(ctx, call) : refuse('No automatic fix: the optimizer step is unknown.');
    case 'PL110':
      return layer && !layer.isTe
        ? refuse('Not converted: its shape breaks the FP8 rule (in_features % 16 == 0, out_features % 16 == 0), and padding changes the model and its checkpoint, so that is left to you.')
        : refuse('No automatic fix: padding a dimension changes the model and its checkpoint; pad it by hand or rebuild the layer as torch.nn.Linear.');
    case 'PL302': {
      // The training step of this file, when it has one (the training script, or a model trained in its own file).
      const wrap = wrapTrainingStep(ctx);
      if (wrap.fix) return outcome([{ ...wrap.fix, codes: ['PL302'], kind: 'quickfix', isPreferred: true }]);
      return refuse(wrap.refusal ?? (finding.layerIndex !== undefined
        ? 'No automatic fix in this file: run "Wrap the training step in FP8 autocast" (Source Action) in the training script.'
        : 'No automatic fix: no training step (a loop that calls backward() and steps an optimizer) was found to wrap; put the forward pass and the loss under fp8_autocast_context() by hand.'));
    }
    case 'PL402':
      return refuse('No automatic fix: log the mode where the FP8 check is made; the FP8 fallback wrapper logs it once at start.');
    case 'PL601':
    case 'PL602':
    case 'PL603':
    case 'PL604':
    case 'PL605':
    case 'PL606':
      return ptqFindingOutcome(ctx, finding);
    case 'PL001':
      return finding.suppressionEdit
        ? outcome([{ id: `PL001:remove-noqa:${finding.span.startLine}`, title: 'Remove unused suppression', kind: 'quickfix', codes: ['PL001'], safe: true, isPreferred: true, edits: [finding.suppressionEdit] }])
        : outcome();
    case 'PL002':
      return refuse('No automatic fix: correct the syntax error by hand.');
    default:
      return outcome();
  }
}

/**
 * "Insert FP8 fallback wrapper" (and PL401's "Guard FP8 with a capability check", the same edit): inserts the wrapper
 * once and routes the file's TE uses through it. With the wrapper already there and nothing left to route, nothing.
 */
function wrapperOutcome(ctx: FixContext, code?: 'PL401'): FixOutcome {
  const why = wrapperRefusal(ctx);
  if (why) return refuse(why);
  const plan = planWrapper(ctx);
  if (!plan.edits.length) {
    return refuse(ctx.fallbackModule && !plan.rewired && !ctx.ir.importsTe
      ? `Nothing to route: the file uses no Transformer Engine; a conversion or the training-step wrap imports ${ctx.fallbackModule.importFrom} when it needs it.`
      : 'The FP8 fallback wrapper is already in place and every TE use goes through it.');
  }
  const remaining = plan.remainingTeUses.length
    ? ` (${plan.remainingTeUses.length} other te.* use${plan.remainingTeUses.length > 1 ? 's' : ''} still need${plan.remainingTeUses.length > 1 ? '' : 's'} TE: ${[...new Set(plan.remainingTeUses)].join(', ')})`
    : '';
  const module = ctx.fallbackModule ? ` (${ctx.fallbackModule.importFrom}${ctx.fallbackModule.exists ? '' : ', created once for the project'})` : '';
  const title = plan.inserted
    ? (code ? `Guard FP8 with a capability check (${module ? `import the FP8 fallback module${module}` : 'insert the FP8 fallback wrapper'})` : module ? `Import the FP8 fallback module${module}` : 'Insert FP8 fallback wrapper') + remaining
    : `Route ${plan.rewired} te.* use${plan.rewired === 1 ? '' : 's'} through the FP8 fallback ${module ? 'module' : 'wrapper'}${remaining}`;
  return outcome([{
    id: plan.inserted ? 'insert-wrapper' : 'route-through-wrapper', title, kind: code ? 'quickfix' : 'source', codes: code ? [code] : ['PL401'],
    safe: false, isPreferred: !!code, edits: plan.edits, ...(plan.createFiles.length ? { createFiles: plan.createFiles } : {}),
  }]);
}

export interface SourceFixOptions {
  /** Adds "Convert all eligible layers in class <name>". */
  className?: string;
  /** Wraps the selected statements (rather than the detected training step) in FP8 autocast; converts layers in it. */
  selection?: { startOffset: number; endOffset: number };
  /** The user's environment (TE version for apiVersion 'auto'). */
  env?: FixEnv;
}

/**
 * File- and selection-level actions: convert all eligible layers (in the class, the selection, the file), insert the
 * FP8 fallback wrapper, wrap the training step (the selection, or each detected loop that calls backward() and steps
 * an optimizer) in `with fp8_autocast_context():`, inserting the wrapper when it is missing.
 */
export function sourceFixes(text: string, ir: ModelIR, settings: PrecisionLensSettings, options: SourceFixOptions = {}): Fix[] {
  return sourceFixOutcome(text, ir, settings, options).fixes;
}

/** sourceFixes with the reasons for the actions not offered. */
export function sourceFixOutcome(text: string, ir: ModelIR, settings: PrecisionLensSettings, options: SourceFixOptions = {}): FixOutcome {
  const ctx = fixContext(text, ir, settings, options.env);
  const fixes: Fix[] = [];
  const refusals: string[] = [];
  const refused: RefusedFix[] = [];
  // A refused action stays visible (disabled, with the reason) under the title it would have had.
  const take = (r: { fix?: Fix; refusal?: string }, id: string, title: string) => {
    if (r.fix) fixes.push(r.fix);
    else if (r.refusal) { refusals.push(r.refusal); refused.push({ id, title, kind: 'source', reason: r.refusal }); }
  };

  if (options.className) {
    take(convertAllFix(ctx, ir.layers.filter((l) => l.ownerClass === options.className), { id: `class:${options.className}`, where: `in class ${options.className}` }),
      `convert-all:class:${options.className}`, `Convert the layers in class ${options.className} to te.*`);
  }
  if (options.selection) {
    const { startOffset, endOffset } = options.selection;
    const inSel = ir.layers.filter((l) => l.span.startOffset >= startOffset && l.span.endOffset <= endOffset);
    if (inSel.length) take(convertAllFix(ctx, inSel, { id: 'selection', where: 'in the selection' }), 'convert-all:selection', 'Convert the layers in the selection to te.*');
  }
  // A file without a single conversion candidate has nothing to refuse.
  if (ir.layers.some((l) => !l.isTe && (l.kind === 'linear' || l.kind === 'layernorm' || l.kind === 'rmsnorm' || l.kind === 'parallel-linear'))) {
    take(convertAllFix(ctx, ir.layers, { id: 'file', where: 'in this file' }), 'convert-all:file', 'Convert the layers in this file to te.*');
  }

  const wrapper = wrapperOutcome(ctx);
  fixes.push(...wrapper.fixes);
  // "Already in place" is no limit; a wrapper that cannot carry the file's autocast arguments is.
  const wrapperWhy = ctx.ir.importsTe && !wrapper.fixes.length ? wrapperRefusal(ctx) : undefined;
  if (wrapperWhy) take({ refusal: wrapperWhy }, 'insert-wrapper', 'Insert FP8 fallback wrapper');

  if (options.selection && options.selection.endOffset > options.selection.startOffset) take(wrapTrainingStep(ctx, options.selection), 'wrap-selection', 'Wrap the selected statements in FP8 autocast');
  take(wrapTrainingStep(ctx), 'wrap-training-step', 'Wrap the training step in FP8 autocast');
  take(ptqFix(ctx), 'ptq-fp8', 'Quantize to FP8 after training (with calibration)');
  return { fixes: withFileEol(text, fixes), refusals, refused };
}

/** "Wrap the training step in FP8 autocast", using the wrapper's context factory (inserted with it when missing). */
function wrapTrainingStep(ctx: FixContext, selection?: { startOffset: number; endOffset: number }): { fix?: Fix; refusal?: string } {
  const targets: { first: Statement; last: Statement }[] = [];
  // The wrap uses the wrapper's context and routes the file's TE uses through it: the same limits apply.
  const why = ctx.hasWrapper ? undefined : wrapperRefusal(ctx);
  if (why) return { refusal: why.replace(/^No automatic fix/, 'No FP8 autocast wrap') };
  let nested: ReturnType<typeof userAutocastSteps> = [];
  if (selection) {
    const sel = selectedStatements(ctx.model, selection, ctx.ir.autocastRegions);
    if (typeof sel === 'string') return { refusal: `No FP8 autocast wrap: ${sel}` };
    targets.push(sel);
  } else {
    // A step under the script's own autocast (`with ctx:`) gets the FP8 context inside it; other steps are wrapped.
    nested = userAutocastSteps(ctx.model, ctx.ir.autocastRegions);
    targets.push(...findTrainingSteps(ctx.model, nested));
  }
  if (!targets.length && !nested.length) return {};
  const edits: TextEdit[] = [
    ...nested.map((n) => nestInUserAutocast(ctx.model, n)),
    ...targets.map((t) => wrapStatements(ctx.model, t.first, t.last, fp8ContextHeader())),
  ];
  // The context comes from the project's module (imported, created with this edit if it is the first to need it) or
  // the inline block; routing the file's own TE uses through the fallback comes with it.
  const plan = ctx.hasWrapper ? undefined : planWrapper(ctx, [CONTEXT_FACTORY]);
  // Routing an existing region through the wrapper would overlap the wrap only if the step is already in one.
  edits.push(...(plan?.edits ?? []).filter((e) => !edits.some((w) => e.startOffset < w.endOffset && w.startOffset < e.endOffset)));
  const createFiles = plan?.createFiles ?? [];
  const count = targets.length + nested.length;
  const what = selection ? 'the selected statements' : count > 1 ? `${count} training steps` : 'the training step';
  const userWith = nested.length ? statementText(ctx.model, nested[0].with).replace(/:$/, '') : '';
  const inUser = userWith ? ` inside \`${userWith.length > 40 ? `${userWith.slice(0, 39)}…` : userWith}\`` : '';
  const via = ctx.fallbackModule ? `; context from ${ctx.fallbackModule.importFrom}${ctx.fallbackModule.exists ? '' : ', created once for the project'}` : '';
  return {
    fix: {
      id: selection ? 'wrap-selection' : 'wrap-training-step', title: `Wrap ${what} in FP8 autocast${inUser} (backward() stays outside${via})`, kind: 'source',
      codes: [], safe: false, edits, ...(createFiles.length ? { createFiles } : {}),
    },
  };
}

/**
 * Applies as many fixes as can go together, in order: a fix whose edits overlap an already accepted one is skipped.
 * What `check --fix` and the property tests use.
 */
export function combineFixes(fixes: readonly Fix[]): { edits: TextEdit[]; applied: Fix[]; skipped: Fix[] } {
  const applied: Fix[] = [];
  const skipped: Fix[] = [];
  const set = new EditSet();
  for (const fix of fixes) (set.tryAdd(fix.edits) ? applied : skipped).push(fix);
  return { edits: set.edits, applied, skipped };
}

/** Applies one fix to the text. */
export function applyFix(text: string, fix: Fix): string {
  return applyEdits(text, fix.edits);
}
