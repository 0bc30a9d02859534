/**
 * What a file has of the FP8 fallback (its inline block, or names imported from the project's module), and the pieces
 * that bring the module in: the import of its names and the module file itself (wrapper.ts puts them together).
 */
import { wrapperRanges } from '../analysis/known';
import { escapeRegExp } from '../analysis/spans';
import { replace, type TextEdit } from './edits';
import { FALLBACK_EXPORTS, fallbackSource } from './fallback-source';
import { addImport } from './imports';
import { perContext } from './memo';
import type { CreatedFile, FixContext } from './types';

/** Names the file can use already: defined in its inline block, or imported from the project's module. */
export function boundFallbackNames(ctx: FixContext): ReadonlySet<string> {
  return perContext(ctx, 'bound', () => boundNames(ctx));
}

function boundNames(ctx: FixContext): Set<string> {
  const out = new Set<string>();
  if (ctx.hasWrapper) {
    const block = wrapperRanges(ctx.text).map(([a, b]) => ctx.text.slice(a, b)).join('\n') || ctx.text;
    for (const m of block.matchAll(/^(?:def|class)\s+(\w+)|^(\w+(?:\s*,\s*\w+)*)\s*=/gm)) {
      for (const n of (m[1] ?? m[2]).split(',')) out.add(n.trim());
    }
    for (const m of block.matchAll(/^\s+(TE_\w+)(?:\s*,\s*(TE_\w+))?(?:\s*=\s*TE_\w+)*\s*=/gm)) { out.add(m[1]); if (m[2]) out.add(m[2]); }
    for (const m of block.matchAll(/\bimport transformer_engine\.pytorch as (\w+)/g)) out.add(m[1]);
    return out;
  }
  const mod = ctx.fallbackModule?.importFrom;
  if (!mod) return out;
  for (const b of ctx.ir.imports) if (b.target === `${mod}.${b.local}`) out.add(b.local);
  return out;
}

/** Whether this file reaches the fallback already (its inline block, or an import from the module). */
export function hasFallback(ctx: FixContext): boolean {
  return ctx.hasWrapper || boundFallbackNames(ctx).size > 0;
}

/**
 * Whether layers converted in this file go through the fallback's factories: always, unless the file imports TE
 * unconditionally itself (it needs TE anyway; te.* is then written directly) and has no fallback.
 */
export function convertsThroughFallback(ctx: FixContext): boolean {
  return hasFallback(ctx) || !ctx.ir.teImportUnguarded;
}


/** The project's module, to create with the fix when it does not exist yet. */
export function moduleFiles(ctx: FixContext): CreatedFile[] {
  const module = ctx.fallbackModule;
  if (!module || module.exists) return [];
  return [...perContext(ctx, 'module-files', () => [{ path: module.path, text: fallbackSource({ api: ctx.api, settings: ctx.settings, teName: 'te', module: true }) }])];
}

/** An import of `names` from `mod`: added to a one-line `from mod import ...` the file has, or a new line. */
export function importNames(ctx: FixContext, mod: string, names: readonly string[]): TextEdit {
  // The search for an existing import line reads the whole text: once per context and name set.
  return perContext(ctx, `import:${mod}:${names.join(',')}`, () => importEdit(ctx, mod, names));
}

function importEdit(ctx: FixContext, mod: string, names: readonly string[]): TextEdit {
  const re = new RegExp(`^from[ \\t]+${escapeRegExp(mod)}[ \\t]+import[ \\t]+([\\w \\t,]+?)[ \\t]*$`, 'm');
  const m = re.exec(ctx.text);
  if (m) {
    const start = m.index + m[0].indexOf(m[1], m[0].indexOf('import') + 6);
    const have = m[1].split(',').map((n) => n.trim()).filter(Boolean);
    const all = [...have, ...names.filter((n) => !have.includes(n))];
    // A sorted line (as this fix writes them) stays sorted; one in the user's own order keeps it, the new names last.
    const sorted = have.every((n, i) => i === 0 || have[i - 1] <= n);
    return replace(start, start + m[1].length, (sorted ? all.sort() : all).join(', '));
  }
  return addImport(ctx.model, `from ${mod} import ${names.join(', ')}`);
}

/** The fallback's functions (fp8_*) that a module's text does not define: it was written by an earlier version. */
export function fallbackLacks(moduleText: string): string[] {
  const defined = new Set([...moduleText.matchAll(/^def\s+(\w+)\s*\(/gm)].map((m) => m[1]));
  return FALLBACK_EXPORTS.filter((n) => n.startsWith('fp8_') && !defined.has(n));
}
