/**
 * Imports: which prefix reaches Transformer Engine and torch.nn under the aliases the file already uses, and where a
 * new import (or the fallback wrapper) goes so that it is defined before module-level code runs.
 */
import type { ModelIR } from '../analysis/ir';
import { insert, type TextEdit } from './edits';
import { blockEnd, statementText, type SourceModel, type Statement } from './source';

/** How generated code reaches a module: the prefix for attribute access and the import to add if none exists. */
export interface ModuleAccess {
  /** `te.`, `tex.pytorch.`, `nn.`, `torch.nn.` */
  prefix: string;
  /** An import statement to add, when the file has none that binds the module. */
  importLine?: string;
}

/** `te.` / `tex.pytorch.` for `import transformer_engine.pytorch as te` / `import transformer_engine as tex`. */
export function teAccess(ir: ModelIR): ModuleAccess {
  const direct = ir.imports.find((b) => b.target === 'transformer_engine.pytorch');
  if (direct) return { prefix: `${direct.local}.` };
  const top = ir.imports.find((b) => b.target === 'transformer_engine');
  if (top) return { prefix: `${top.local}.pytorch.` };
  return { prefix: 'te.', importLine: 'import transformer_engine.pytorch as te' };
}

/** `nn.` when torch.nn is bound, `torch.nn.` when only torch is, else adds `import torch.nn as nn`. */
export function torchNnAccess(ir: ModelIR): ModuleAccess {
  const nn = ir.imports.find((b) => b.target === 'torch.nn');
  if (nn) return { prefix: `${nn.local}.` };
  const torch = ir.imports.find((b) => b.target === 'torch');
  if (torch) return { prefix: `${torch.local}.nn.` };
  return { prefix: 'nn.', importLine: 'import torch.nn as nn' };
}

/**
 * How generated code names `module.attr`: the name an unguarded import binds it to (`partial`), through the module's
 * name (`ac.checkpoint_wrapper`), or `attr` with the import to add; undefined where `attr` names something else here.
 */
export function attributeAccess(ir: ModelIR, text: string, module: string, attr: string): { name: string; importLine?: string } | undefined {
  const target = `${module}.${attr}`;
  const direct = ir.imports.find((b) => b.target === target && !b.guarded);
  if (direct) return { name: direct.local };
  const viaModule = ir.imports.find((b) => b.target === module && !b.guarded);
  if (viaModule) return { name: `${viaModule.local}.${attr}` };
  if (ir.imports.some((b) => b.local === attr && b.target !== target) || new RegExp(`^\\s*(def|class)\\s+${attr}\\b|^\\s*${attr}\\s*=`, 'm').test(text)) return undefined;
  return { name: attr, importLine: `from ${module} import ${attr}` };
}

/** `torch` when it is imported under that name. */
export function torchName(ir: ModelIR): string | undefined {
  return ir.imports.find((b) => b.target === 'torch')?.local;
}

const IMPORT_RE = /^(import|from)\s/;
/** Statements at which module-level code starts using what the imports define. */
const CODE_START_RE = /^(def|class|async|if|for|while|with|@)\b|^@/;

function isImport(model: SourceModel, s: Statement): boolean {
  return IMPORT_RE.test(statementText(model, s));
}

/**
 * Offset at which to insert module-level code that needs the file's imports: after the last top-level import (a
 * guarded `try: import ... except ImportError:` chain counts as one) that comes before the first function, class or
 * compound statement, so the inserted names exist before anything at module level can use them.
 */
export function afterImportsOffset(model: SourceModel): number {
  const top = model.statements;
  let after = -1;
  let docstringEnd = 0;
  for (let k = 0; k < top.length; k++) {
    const s = top[k];
    const t = statementText(model, s);
    if (k === 0 && /^[rRuUbB]?("""|'''|"|')/.test(t)) { docstringEnd = s.lineEnd; continue; }
    if (isImport(model, s)) { after = s.lineEnd; continue; }
    if (/^try\s*:/.test(t)) {
      if (!s.children.some((c) => isImport(model, c))) break;
      let last = s;
      while (top[k + 1] && top[k + 1].indent === s.indent && /^(except|else|finally)\b/.test(statementText(model, top[k + 1]))) last = top[++k];
      after = blockEnd(last);
      continue;
    }
    if (CODE_START_RE.test(t)) break;
  }
  return after >= 0 ? after : docstringEnd;
}

/** An edit that adds one import line at the import insertion point (newline handled at the end of the file). */
export function addImport(model: SourceModel, line: string): TextEdit {
  const at = afterImportsOffset(model);
  const needsNewline = at > 0 && model.text[at - 1] !== '\n';
  return insert(at, `${needsNewline ? '\n' : ''}${line}\n`);
}
