/**
 * The FP8 fallback wrapper (DESIGN.md, "The FP8 fallback wrapper"): one block per file that imports TE if it can,
 * decides once whether FP8 runs here, logs that choice, and offers layer and autocast factories that give te.* / TE
 * autocast on FP8 hardware and torch.nn / BF16 autocast everywhere else. Inserting it also routes the file's existing
 * TE uses through it (moving bare TE imports into its try block), so the file imports and runs without TE.
 */
import type { ModelIR } from '../analysis/ir';
import { insert, replace, type TextEdit } from './edits';
import { afterImportsOffset, torchName } from './imports';
import { indentUnit } from './indent';
import { constructorSite, splitCallArgs, statementAt, statementText, type Statement } from './source';
import { CONTEXT_FACTORY, FACTORY_BY_TE_CLASS, fallbackSource } from './fallback-source';
import { boundFallbackNames, importNames, moduleFiles } from './fallback';
import { perContext } from './memo';
import type { CreatedFile, FixContext } from './types';

/** First line of the block: how fixes (and people) recognise it (defined with the analysis, which skips the block). */
export { WRAPPER_MARKER } from '../analysis/known';
import { WRAPPER_MARKER, wrapperRanges } from '../analysis/known';

export { CONTEXT_FACTORY } from './fallback-source';

/** Whether the file already has the wrapper (its marker, or its functions written by hand). */
export function hasWrapper(text: string): boolean {
  return text.includes(WRAPPER_MARKER) || /^def (fp8_available|fp8_autocast_context)\s*\(/m.test(text);
}

/** The local name the wrapper binds transformer_engine.pytorch to: `te`, unless the file uses `te` for another module. */
export function wrapperTeName(ir: ModelIR): string {
  const clash = ir.imports.some((b) => b.local === 'te' && b.target !== 'transformer_engine.pytorch');
  return clash ? 'te_pytorch' : 'te';
}

/** The inline block's Python source. `movedImports` are the file's bare TE imports, now guarded inside its try block. */
export function wrapperSource(ctx: FixContext, movedImports: string[], movedNames: string[]): string {
  return fallbackSource({
    api: ctx.api, settings: ctx.settings, teName: wrapperTeName(ctx.ir), movedImports, movedNames,
    hasTorch: torchName(ctx.ir) === 'torch',
    // The file may import contextlib already (a context factory of its own): once is enough.
    hasContextlib: ctx.ir.imports.some((b) => b.local === 'contextlib' && b.target === 'contextlib'),
  });
}

/**
 * What the fallback cannot carry over, as a refusal: a distributed amax reduction group (its context takes none), any
 * other autocast argument than enabled and the recipe (`calibrating=True`, `**kwargs`: they would be dropped), and
 * TE-only forward arguments that the torch.nn fallback layers would reject.
 */
export function wrapperRefusal(ctx: FixContext): string | undefined {
  const importTime = teAtImportTime(ctx);
  if (importTime) {
    return `No automatic fix: line ${importTime.line} uses Transformer Engine when the file is imported (${importTime.what}); guarding the import (te = None without TE) would still fail there, with AttributeError instead of ImportError. Put what it builds behind \`if te is not None:\` with a torch.nn stand-in, or keep TE required in this file.`;
  }
  const grouped = ctx.ir.autocastRegions.find((r) => !r.disabled && (r.args.fp8_group !== undefined || r.args.amax_reduction_group !== undefined));
  if (grouped) {
    return `No automatic fix: the FP8 autocast at line ${grouped.span.startLine + 1} reduces amax over a process group (${grouped.args.fp8_group ?? grouped.args.amax_reduction_group}), which the fallback wrapper's context does not take. Guard it by hand: enabled=te.is_fp8_available() and a BF16 path.`;
  }
  for (const r of ctx.ir.autocastRegions) {
    const other = Object.keys(r.args).filter((k) => !/^(enabled|recipe|fp8_recipe)$/.test(k));
    if (other.length) {
      const shown = other.map((k) => (k === '**' || k === '*' ? r.args[k] : `${k}=${r.args[k]}`)).join(', ');
      return `No automatic fix: the FP8 autocast at line ${r.span.startLine + 1} passes ${shown}, which the fallback wrapper's context does not take (it would be dropped). Guard it by hand: enabled=te.is_fp8_available() and a BF16 path.`;
    }
  }
  const teOnlyKw = teOnlyKeyword(ctx.text);
  if (teOnlyKw) {
    return `No automatic fix: the file passes ${teOnlyKw[1]}= to TE layers, which the torch.nn fallback layers do not accept. Guard FP8 by hand (enabled=te.is_fp8_available()) and keep the TE layers.`;
  }
  return undefined;
}

/**
 * A use of a bare TE import's name that runs when the file is imported, which a guarded import cannot cover: a
 * top-level class deriving from a TE class (`class Block(te.pytorch.TransformerLayer)`), a top-level decorator, a
 * top-level statement calling or reading into TE (recipes and te.Linear / LayerNorm / RMSNorm excepted: the fix
 * evaluates the former only with TE and routes the latter through the factories).
 */
function teAtImportTime(ctx: FixContext): { line: number; what: string } | undefined {
  const names = [...new Set(ctx.ir.imports.filter((b) => !b.guarded && b.target.startsWith('transformer_engine')).map((b) => b.local))]
    .filter((n) => /^[A-Za-z_]\w*$/.test(n));
  if (!names.length) return undefined;
  const name = new RegExp(`\\b(${names.join('|')})\\b(?!\\s*(is|==|!=|=[^=]))`);
  const use = new RegExp(`\\b(${names.join('|')})\\s*[.(]`);
  // Recipes are evaluated only with TE, te.Linear / LayerNorm / RMSNorm go through the factories: the fix covers those.
  const covered = new Set(ctx.ir.recipes.map((r) => r.span.startLine));
  for (const l of ctx.ir.layers) if (l.isTe && TE_FACTORY_BY_CLASS[baseName(l.resolved)]) covered.add(l.span.startLine);
  // Top-level statements only (the source model knows strings: a docstring mentioning te.fp8_autocast is no use).
  for (const st of ctx.model.statements) {
    const ln = statementText(ctx.model, st);
    const line = st.firstLine + 1;
    const cls = /^class\s+(\w+)\s*\(([^)]*)\)/.exec(ln);
    if (cls) {
      if (name.test(cls[2])) return { line, what: `class ${cls[1]}(${cls[2].replace(/\s+/g, ' ').trim()})` };
      continue;
    }
    if (/^@/.test(ln)) { if (name.test(ln.split('\n')[0])) return { line, what: ln.split('\n')[0].trim() }; continue; }
    if (st.isHeader || /^['"]|^[rbuf]+['"]|^(def|import|from|async|assert|return)\b/i.test(ln)) continue;
    if (covered.has(st.firstLine)) continue;
    const flat = ln.replace(/\s+/g, ' ').trim();
    if (use.test(flat)) return { line, what: flat.length > 70 ? `${flat.slice(0, 67)}...` : flat };
  }
  return undefined;
}

/** A bare (unguarded, top-level) TE import statement the wrapper takes over. */
interface BareImport {
  stmt: Statement;
  text: string;
  names: string[];
}

function bareTeImports(ctx: FixContext): BareImport[] {
  const out = new Map<Statement, BareImport>();
  for (const b of ctx.ir.imports) {
    if (b.guarded || !b.target.startsWith('transformer_engine')) continue;
    const stmt = statementAt(ctx.model, b.span.startOffset);
    if (!stmt || stmt.parent || stmt.isHeader) continue;
    const text = statementText(ctx.model, stmt);
    if (!/^(import|from)\s/.test(text) || text.includes(';')) continue;
    const entry = out.get(stmt) ?? { stmt, text: text.replace(/\s*\\?\r?\n\s*/g, ' '), names: [] };
    entry.names.push(b.local);
    out.set(stmt, entry);
  }
  return [...out.values()];
}

/** What routing the file through the fallback does: the edits and the TE uses it could not route. */
export interface WrapperPlan {
  edits: TextEdit[];
  /** The fallback is brought in by these edits: the inline block inserted, or the module imported (false: it was there). */
  inserted: boolean;
  /** te.* layers and autocast regions now going through the factories. */
  rewired: number;
  /** TE uses left as they were (te.TransformerLayer, te.LayerNormMLP...): they still need TE to run. */
  remainingTeUses: string[];
  /** The project's module, when these edits are the first to need it. */
  createFiles: CreatedFile[];
}

/** The constructor name without its module prefix (`te.pytorch.Linear` -> `Linear`). */
function baseName(callee: string): string {
  return callee.split('.').pop() ?? callee;
}

const TE_FACTORY_BY_CLASS = FACTORY_BY_TE_CLASS;

/** A bare TE import made optional where it stands (module mode: the module decides whether FP8 runs). */
function guardedImport(ctx: FixContext, imp: BareImport): string {
  const unit = indentUnit(ctx.model);
  const nones = [...new Set(imp.names)].map((n) => `${unit}${n} = None`).join('\n');
  return `try:\n${unit}${imp.text}\nexcept ImportError:  # Transformer Engine is optional: the FP8 fallback module decides whether FP8 runs\n${nones}`;
}

/** The file's te.Linear / LayerNorm / RMSNorm through the factories, its FP8 autocast through the fallback's context. */
function routeTeUses(ctx: FixContext, teName: string, used: Set<string>): { edits: TextEdit[]; rewired: number; remaining: string[] } {
  const { ir, text } = ctx;
  const edits: TextEdit[] = [];
  const remaining: string[] = [];
  let rewired = 0;
  // A layer built through the wrapper's own factory (`fp8_linear(...)`) is seen at the te.Linear inside the wrapper:
  // it is routed already, and rewriting that te.Linear would make the factory call itself.
  const own = ctx.hasWrapper ? wrapperRanges(text) : [];
  for (const layer of ir.layers) {
    if (!layer.isTe || layer.viaFallback) continue;
    const site = constructorSite(text, layer);
    if (own.some(([a, b]) => site.calleeStart >= a && site.calleeStart < b)) continue;
    const factory = TE_FACTORY_BY_CLASS[baseName(layer.resolved)];
    // A tensor-parallel te.Linear has no torch.nn twin of the same shard: fp8_linear would build full-size weights.
    const parallel = splitCallArgs(text, site.open)?.args.some((a) => a.name === 'parallel_mode' || a.name === 'tp_group');
    if (!factory || parallel) { remaining.push(parallel ? `${layer.constructor}(parallel_mode=...)` : layer.constructor); continue; }
    edits.push(replace(site.calleeStart, site.calleeEnd, factory));
    used.add(factory);
    rewired++;
  }
  for (const region of ir.autocastRegions) {
    if (region.api === 'fallback') continue;
    const args: string[] = [];
    if (region.disabled) args.push('enabled=False');
    else if (region.args.enabled !== undefined && region.args.enabled.trim() !== 'True') args.push(`enabled=${region.args.enabled.trim()}`);
    const recipe = (region.args.recipe ?? region.args.fp8_recipe)?.trim();
    if (recipe) args.push(`recipe=${/^[A-Za-z_][\w.]*$/.test(recipe) ? recipe : `(${recipe}) if ${teName} is not None else None`}`);
    edits.push(replace(region.callSpan.startOffset, region.callSpan.endOffset, `${CONTEXT_FACTORY}(${args.join(', ')})`));
    used.add(CONTEXT_FACTORY);
    rewired++;
  }
  return { edits, rewired, remaining };
}

/** `fp8_recipe = DelayedScaling(...)` runs at import time: without TE its name is None, so evaluate it only with TE. */
function conditionalRecipes(ctx: FixContext, teName: string): TextEdit[] {
  const edits: TextEdit[] = [];
  for (const recipe of ctx.ir.recipes) {
    const stmt = statementAt(ctx.model, recipe.span.startOffset);
    if (!stmt) continue;
    const s = statementText(ctx.model, stmt);
    const rhsStart = stmt.start + (/^[A-Za-z_][\w.]*\s*(:[^=]+)?=\s*/.exec(s)?.[0].length ?? -1);
    if (rhsStart >= stmt.start && rhsStart === recipe.span.startOffset && recipe.span.endOffset === stmt.end) {
      edits.push(insert(recipe.span.endOffset, ` if ${teName} is not None else None`));
    }
  }
  return edits;
}

/** The inline block, inserted after the imports with the file's indentation and PEP 8 blank lines. */
function insertBlock(ctx: FixContext, moved: BareImport[]): TextEdit {
  const { text } = ctx;
  const at = afterImportsOffset(ctx.model);
  const before = at > 0 && text[at - 1] !== '\n' ? '\n' : '';
  // The block is written with 4-space indentation; a tab- or 2-space-indented file gets its own unit.
  const unit = indentUnit(ctx.model);
  const block = wrapperSource(ctx, moved.map((m) => m.text), moved.flatMap((m) => m.names))
    .replace(/^((?: {4})+)/gm, (ws) => unit.repeat(ws.length / 4));
  // Two blank lines around the block (PEP 8 around top-level definitions), counting those already there.
  const blankAfter = /^(?:[ \t]*\r?\n)*/.exec(text.slice(at))![0].split('\n').length - 1;
  return insert(at, `${before}\n\n${block}${'\n'.repeat(Math.max(0, 2 - blankAfter))}`);
}

/**
 * Routes the file's TE through the fallback: te.Linear / LayerNorm / RMSNorm constructions call the factories, FP8
 * autocast regions call fp8_autocast_context(), recipe assignments evaluate only when TE imported. With the project's
 * module, bare TE imports become optional where they stand and the names used are imported from the module; without
 * it, the inline block is inserted (once) and the bare TE imports move into its try block.
 */
export function planWrapper(ctx: FixContext, alsoImport: readonly string[] = []): WrapperPlan {
  // The same for every finding of the file (the conversions ask for it once each): planned once per context.
  const plan = perContext(ctx, `wrapper:${alsoImport.join(',')}`, () => planWrapperOnce(ctx, alsoImport));
  return { ...plan, edits: [...plan.edits], remainingTeUses: [...plan.remainingTeUses], createFiles: [...plan.createFiles] };
}

function planWrapperOnce(ctx: FixContext, alsoImport: readonly string[]): WrapperPlan {
  const { ir } = ctx;
  const module = ctx.fallbackModule;
  const edits: TextEdit[] = [];
  // Module mode: the names the edits use, plus those the caller's own edits need (the context of a wrap).
  const used = new Set<string>(alsoImport);
  const moved = ctx.hasWrapper ? [] : bareTeImports(ctx);
  for (const imp of moved) {
    edits.push(module ? replace(imp.stmt.start, imp.stmt.end, guardedImport(ctx, imp)) : replace(imp.stmt.lineStart, imp.stmt.lineEnd, ''));
  }
  if (ctx.hasWrapper) {
    // The wrapper binds TE itself: a bare `import transformer_engine.pytorch as te` next to it only defeats the fallback.
    for (const b of ir.imports) {
      if (b.guarded || b.target !== 'transformer_engine.pytorch' || b.local !== wrapperTeName(ir)) continue;
      const stmt = statementAt(ctx.model, b.span.startOffset);
      if (stmt && !stmt.parent && /^import\s+transformer_engine\.pytorch\s+as\s+\w+\s*$/.test(statementText(ctx.model, stmt))) {
        edits.push(replace(stmt.lineStart, stmt.lineEnd, ''));
      }
    }
  }
  // With the module, the file binds TE only through its own (now optional) imports; the module's te_recipe is None
  // exactly when TE is missing.
  const teBinding = module ? moved.flatMap((m) => m.names).find((n) => ir.imports.some((b) => b.local === n && b.target === 'transformer_engine.pytorch')) : undefined;
  const teName = module ? teBinding ?? 'te_recipe' : wrapperTeName(ir);
  const routed = routeTeUses(ctx, teName, used);
  edits.push(...routed.edits);
  const recipes = conditionalRecipes(ctx, teName);
  edits.push(...recipes);
  if (module && teName === 'te_recipe' && (recipes.length || routed.edits.some((e) => e.newText.includes(' if te_recipe is not None')))) used.add('te_recipe');
  const plan = { edits, inserted: false, rewired: routed.rewired, remainingTeUses: routed.remaining, createFiles: [] as CreatedFile[] };
  if (module) {
    const bound = boundFallbackNames(ctx);
    const missing = [...used].filter((n) => !bound.has(n)).sort();
    if (missing.length) {
      edits.push(importNames(ctx, module.importFrom, missing));
      plan.createFiles = moduleFiles(ctx);
      plan.inserted = true;
    }
  } else if (!ctx.hasWrapper) {
    edits.push(insertBlock(ctx, moved));
    plan.inserted = true;
  }
  return plan;
}

/** What bringing the fallback in takes. */
export interface FallbackBringIn {
  edits: TextEdit[];
  createFiles: CreatedFile[];
  /** `fp8_fallback`, `fp8_fallback.py, created once for the project`, `an inline block`: for titles. */
  where: string;
  refusal?: string;
}

/**
 * The edits that make `names` (factories, the context, TE_* classes) usable in the file: an import from the module
 * (and the module itself when it does not exist), or the inline block (inserted once, routing the file's TE through it).
 */
export function bringInFallback(ctx: FixContext, names: readonly string[]): FallbackBringIn {
  const bound = boundFallbackNames(ctx);
  const missing = [...new Set(names)].filter((n) => !bound.has(n)).sort();
  const module = ctx.fallbackModule;
  if (module) {
    const file = module.path.split(/[\\/]/).pop()!;
    const old = module.exists ? missing.filter((n) => module.lacks?.includes(n)) : [];
    if (old.length) {
      return { edits: [], createFiles: [], where: module.importFrom, refusal: `the project's ${file} was written before ${old.join(', ')} existed; delete it and apply the fix again to have it written anew.` };
    }
    const createFiles = moduleFiles(ctx);
    const edits = missing.length ? [importNames(ctx, module.importFrom, missing)] : [];
    return { edits, createFiles, where: module.exists ? module.importFrom : `${file}, created once for the project` };
  }
  if (ctx.hasWrapper) {
    if (missing.length) {
      return { edits: [], createFiles: [], where: 'the inline block', refusal: `the file's FP8 fallback block predates ${missing.join(', ')}; delete the block and insert it again to get ${missing.length > 1 ? 'them' : 'it'}.` };
    }
    return { edits: [], createFiles: [], where: 'the inline block' };
  }
  const why = wrapperRefusal(ctx);
  if (why) return { edits: [], createFiles: [], where: 'an inline block', refusal: why.replace(/^No automatic fix: /, '') };
  return { edits: planWrapper(ctx).edits, createFiles: [], where: 'an inline block' };
}

/** The first TE-only keyword argument in the text; remembered for the last text (asked once per fix of a file). */
let lastKeyword: { text: string; hit: RegExpExecArray | null } | undefined;
function teOnlyKeyword(text: string): RegExpExecArray | null {
  if (lastKeyword?.text !== text) lastKeyword = { text, hit: /\b(is_first_microbatch|fp8_output|fp8_grad)\s*=/.exec(text) };
  return lastKeyword.hit;
}
