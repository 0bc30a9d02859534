/**
 * Import bindings and name resolution: `nn.Linear` -> `torch.nn.Linear`, `te.pytorch.Linear` ->
 * `transformer_engine.pytorch.Linear`, `L` -> `torch.nn.Linear`.
 */
import type { SyntaxNode } from './node';
import type { ImportBinding } from './ir';
import { isCatalogued, isLibraryName, modulesEndingWith, torchNnStarName, type Library } from './catalogue';
import { spanOf } from './spans';
import { leftOf, rightOf, type AssignRec, type ImportRec } from './walk';

export interface ImportTable {
  bindings: ImportBinding[];
  /** local name -> dotted target */
  map: Map<string, string>;
  /** Modules imported with `from X import *`. */
  starModules: string[];
  /** `import transformer_engine.pytorch.fp8` / `from transformer_engine.pytorch.fp8 import ...` statements. */
  teFp8ModuleImports: SyntaxNode[];
}

function dotted(src: string, n: SyntaxNode): string {
  return src.slice(n.startIndex, n.endIndex).replace(/\s+/g, '');
}

/** `if TYPE_CHECKING:`, or a test of Transformer Engine's presence (`if HAVE_TE:`, `if is_te_available():`). */
function guardCondition(c: string): boolean {
  return /\bTYPE_CHECKING\b/.test(c)
    || (/transformer_engine|(^|[^a-z])(te|TE|fp8|FP8)([^a-z]|$)/.test(c) && /avail|AVAIL|HAVE|HAS_|has_|installed|INSTALLED|find_spec|Requirement|version|VERSION/.test(c));
}

/** Whether an import sits in an `if` whose condition only holds when the package is there (or never at run time). */
function underCondition(src: string, node: SyntaxNode): boolean {
  for (let p = node.parent, i = 0; p && i < 6; p = p.parent, i++) {
    if (p.type === 'if_statement' || p.type === 'elif_clause') {
      const c = p.childForFieldName('condition');
      if (c && guardCondition(src.slice(c.startIndex, c.endIndex))) return true;
    }
    if (p.type === 'function_definition' || p.type === 'class_definition') return false;
  }
  return false;
}

/** Reads every import statement into bindings. */
export function collectImports(src: string, recs: ImportRec[]): ImportTable {
  const table: ImportTable = { bindings: [], map: new Map(), starModules: [], teFp8ModuleImports: [] };
  const add = (local: string, target: string, node: SyntaxNode, guarded: boolean): void => {
    table.bindings.push({ local, target, span: spanOf(node), guarded });
    table.map.set(local, target);
  };
  for (const { node, scope } of recs) {
    // An import inside a function runs when the function does: the module itself loads without the package. One
    // under `if TYPE_CHECKING:` never runs; one under an availability test (`if HAVE_TE:`) runs only with the package.
    const guarded = scope.guarded || scope.fn !== undefined || underCondition(src, node);
    if (node.type === 'import_statement') {
      for (const c of node.namedChildren) {
        if (!c) continue;
        if (c.type === 'dotted_name') {
          const full = dotted(src, c);
          if (/^transformer_engine\.pytorch\.fp8$/.test(full)) table.teFp8ModuleImports.push(node);
          // `import a.b.c` binds `a`; attribute access then walks the real path.
          const top = full.split('.')[0];
          if (top) add(top, top, node, guarded);
        } else if (c.type === 'aliased_import') {
          const nameNode = c.childForFieldName('name');
          const alias = c.childForFieldName('alias');
          if (nameNode && alias) {
            const full = dotted(src, nameNode);
            if (/^transformer_engine\.pytorch\.fp8$/.test(full)) table.teFp8ModuleImports.push(node);
            add(dotted(src, alias), full, node, guarded);
          }
        }
      }
    } else {
      const modNode = node.childForFieldName('module_name');
      if (!modNode) continue;
      const mod = dotted(src, modNode);
      if (/^transformer_engine\.pytorch\.fp8$/.test(mod)) table.teFp8ModuleImports.push(node);
      for (const c of node.namedChildren) {
        if (!c || c.startIndex === modNode.startIndex) continue;
        if (c.type === 'wildcard_import') { table.starModules.push(mod); continue; }
        if (c.type === 'dotted_name') {
          const name = dotted(src, c);
          const full = joinModule(mod, name);
          if (full === 'transformer_engine.pytorch.fp8') table.teFp8ModuleImports.push(node);
          add(name, full, node, guarded);
        } else if (c.type === 'aliased_import') {
          const nameNode = c.childForFieldName('name');
          const alias = c.childForFieldName('alias');
          if (nameNode && alias) {
            const full = joinModule(mod, dotted(src, nameNode));
            if (full === 'transformer_engine.pytorch.fp8') table.teFp8ModuleImports.push(node);
            add(dotted(src, alias), full, node, guarded);
          }
        }
      }
    }
  }
  return table;
}

/**
 * Relative imports inside a catalogued library's own package (`from ..normalization import RMSNorm` in diffusers'
 * models): each relative module is matched against the catalogue's modules by its tail, which places the file's
 * package under one anchor (`..normalization` -> diffusers.models.normalization puts `..` at diffusers.models). The
 * imports are read as that library's when at least two distinct modules of one anchor (same library, same package,
 * same number of dots) supply a class the catalogue lists by that exact name, and no other anchor has as many. A
 * project's own `normalization.py` (one match), or a tail that a second library also has (`..modeling_utils`), is no
 * such evidence: a coincidental match no longer cancels the others, and module names alone are not enough.
 */
export function resolveRelativeImports(table: ImportTable): void {
  const rel = table.bindings.filter((b) => b.target.startsWith('.'));
  if (rel.length < 2) return;
  const split = (target: string) => {
    const dots = /^\.+/.exec(target)?.[0].length ?? 0;
    const path = target.slice(dots);
    const cut = path.lastIndexOf('.');
    return { dots, tail: cut < 0 ? '' : path.slice(0, cut), name: path.slice(cut + 1) };
  };
  /** Per anchor (`library|package|dots`): the modules that supply a catalogued class, and every module matched. */
  const anchors = new Map<string, { lib: Library; evidence: Set<string>; modules: Map<string, string> }>();
  for (const b of rel) {
    const { dots, tail, name } = split(b.target);
    if (!tail) continue;
    for (const [lib, mods] of modulesEndingWith(tail)) {
      for (const m of mods) {
        const key = `${lib}|${m.slice(0, m.length - tail.length - 1)}|${dots}`;
        const a = anchors.get(key) ?? { lib, evidence: new Set<string>(), modules: new Map<string, string>() };
        a.modules.set(`${dots}|${tail}`, m);
        if (isCatalogued(`${m}.${name}`)) a.evidence.add(m);
        anchors.set(key, a);
      }
    }
  }
  const ranked = [...anchors.values()].sort((x, y) => y.evidence.size - x.evidence.size);
  const best = ranked[0];
  if (!best || best.evidence.size < 2 || (ranked[1] && ranked[1].evidence.size === best.evidence.size)) return;
  for (const b of rel) {
    const { dots, tail, name } = split(b.target);
    const mod = best.modules.get(`${dots}|${tail}`);
    if (!mod) continue;
    const full = `${mod}.${name}`;
    if (table.map.get(b.local) === b.target) table.map.set(b.local, full);
    b.target = full;
  }
}

function joinModule(mod: string, name: string): string {
  return mod.endsWith('.') ? mod + name : `${mod}.${name}`;
}

/**
 * Module-level aliases: `Linear = nn.Linear`, `LayerNorm = te.LayerNorm if HAVE_TE else nn.LayerNorm` (the first
 * branch that resolves to something known wins).
 */
export function collectAliases(src: string, table: ImportTable, assigns: AssignRec[]): void {
  for (const a of assigns) {
    const left = leftOf(a);
    let right = rightOf(a);
    if (!left || !right || left.type !== 'identifier') continue;
    if (right.type === 'conditional_expression') right = right.namedChild(0) ?? right;
    if (right.type !== 'attribute' && right.type !== 'identifier') continue;
    const target = resolveName(table, src.slice(right.startIndex, right.endIndex));
    if (isLibraryName(target)) {
      const local = src.slice(left.startIndex, left.endIndex);
      if (!table.map.has(local)) table.map.set(local, target);
    }
  }
}

/** Resolves a dotted expression through the import table; unknown heads stay as written. */
export function resolveName(table: ImportTable, text: string): string {
  const clean = text.replace(/\s+/g, '');
  const dot = clean.indexOf('.');
  const head = dot < 0 ? clean : clean.slice(0, dot);
  const rest = dot < 0 ? '' : clean.slice(dot);
  const target = table.map.get(head);
  if (target !== undefined) return target + rest;
  if (dot < 0) {
    for (const m of table.starModules) {
      if (m === 'torch.nn' && torchNnStarName(head)) return `torch.nn.${head}`;
      if (m === 'transformer_engine.pytorch' && /^[A-Z]/.test(head)) return `transformer_engine.pytorch.${head}`;
    }
  }
  return clean;
}
