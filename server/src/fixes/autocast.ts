/**
 * FP8 autocast around the training step, and PL301: backward() out of the autocast block. TE's docs run only the
 * forward pass and the loss under autocast; backward() and the optimizer step stay outside.
 */
import type { AutocastRegion } from '../analysis/ir';
import { replace, type TextEdit } from './edits';
import { dedentLines, indentLines, indentUnit } from './indent';
import { allStatements, blockEnd, lineOf, siblingsOf, statementAt, statementText, type SourceModel, type Statement } from './source';
import { CONTEXT_FACTORY } from './wrapper';
import { outcome, refuse, type FixContext, type FixOutcome } from './types';

const BACKWARD_RE = /\.backward\s*\(/;
/** Statements that belong after backward(): optimizer and scaler steps, gradient clipping, zero_grad. */
const OPTIMIZER_OP_RE = /\.(step|zero_grad|update|unscale_)\s*\(|clip_grad_(norm|value)_?\s*\(/;
/** Statements that fetch or move data: they need not run under autocast, so the wrapped block starts after them. */
const DATA_RE = /\bnext\s*\(|get_batch\s*\(|^\s*[\w, ()[\]]+=\s*[\w.[\]"']+\s*$|^\s*[\w, ()[\]]+=\s*[\w.[\]"']+\.(to|cuda)\s*\(/;
const AUTOCAST_RE = /autocast/;

/** The whole source of a statement and its block. */
function fullText(model: SourceModel, s: Statement): string {
  return model.text.slice(s.start, blockEnd(s));
}

/** The edit that puts statements [first..last] (siblings) inside `with <header>:`, re-indented by one unit. */
export function wrapStatements(model: SourceModel, first: Statement, last: Statement, header: string): TextEdit {
  const unit = indentUnit(model);
  const end = blockEnd(last);
  const body = indentLines(model, first.firstLine, lineOf(model.lineStarts, end - 1), unit);
  return replace(first.lineStart, end, `${first.indent}with ${header}:\n${body}`);
}

/** Names the backward() statement differentiates (`loss` in `loss.backward()`, `scaler.scale(loss).backward()`). */
function lossNames(stmtText: string): string[] {
  const names = stmtText.replace(/\.backward\s*\(.*$/s, '').match(/[A-Za-z_]\w*/g) ?? [];
  return names.filter((n) => !['scaler', 'scale', 'self', 'accelerator'].includes(n));
}

function assigns(stmtText: string, names: string[]): boolean {
  const m = /^([^=(]*?)(?<![=!<>])=(?!=)/.exec(stmtText) ?? /^([^=(]*?)[+\-*/]=/.exec(stmtText);
  return !!m && names.some((n) => new RegExp(`\\b${n}\\b`).test(m[1]));
}

/** A detected training step: the loop body statements to wrap. */
export interface TrainingStep {
  loop: Statement;
  first: Statement;
  last: Statement;
}

/**
 * The forward block of a step whose backward() is `body[b]`: it ends at the statement computing the differentiated
 * loss and starts after the last data-loading or zero_grad statement before it. Undefined when it holds only data.
 */
function forwardRange(model: SourceModel, body: readonly Statement[], b: number): { first: Statement; last: Statement } | undefined {
  const names = lossNames(statementText(model, body[b]));
  let lossIdx = -1;
  for (let i = b - 1; i >= 0; i--) if (!body[i].isHeader && assigns(statementText(model, body[i]), names)) { lossIdx = i; break; }
  if (lossIdx < 0) lossIdx = b - 1;
  let start = lossIdx;
  while (start - 1 >= 0) {
    const prev = body[start - 1];
    const t = statementText(model, prev);
    if (prev.isHeader || /zero_grad/.test(t) || DATA_RE.test(t) || BACKWARD_RE.test(t) || OPTIMIZER_OP_RE.test(t)) break;
    start--;
  }
  if (DATA_RE.test(statementText(model, body[start])) && start === lossIdx) return undefined;
  return { first: body[start], last: body[lossIdx] };
}

/**
 * Training steps: loops whose own body calls `.backward()` and steps an optimizer. Loops already under an autocast
 * `with`, and loops holding the script's own autocast (`userAutocastSteps`), are left alone.
 */
export function findTrainingSteps(model: SourceModel, users: readonly UserAutocastStep[] = []): TrainingStep[] {
  const steps: TrainingStep[] = [];
  for (const loop of allStatements(model)) {
    if (!/^(async\s+)?(for|while)\b/.test(statementText(model, loop)) || !loop.isHeader) continue;
    const body = loop.children;
    const b = body.findIndex((s) => !s.isHeader && BACKWARD_RE.test(statementText(model, s)));
    if (b <= 0) continue;
    if (!body.some((s) => OPTIMIZER_OP_RE.test(fullText(model, s)) && /\.step\s*\(/.test(fullText(model, s)))) continue;
    if (body.some((s, i) => i < b && s.isHeader && AUTOCAST_RE.test(statementText(model, s)))) continue;
    if (inside(loop, (s) => s.isHeader && /^with\b/.test(statementText(model, s)) && AUTOCAST_RE.test(statementText(model, s)))) continue;
    if (users.some((u) => inside(u.with, (s) => s === loop))) continue;
    const range = forwardRange(model, body, b);
    if (range) steps.push({ loop, ...range });
  }
  return steps;
}

/**
 * A training step under the script's own autocast: `with ctx:` (ctx bound to torch.amp.autocast / torch.autocast /
 * torch.cuda.amp.autocast / nullcontext, nanoGPT's and llama2.c's `ctx = nullcontext() if cpu else autocast(...)`),
 * `with torch.autocast(...):`, `with accelerator.autocast():`. The FP8 context goes inside it so that it keeps its
 * dtype: appended to the header (`with ctx, fp8_autocast_context(inside_autocast=True):`, entered after ctx) when the
 * block holds the forward pass only, else around the forward statements in the block (backward() stays outside).
 */
export interface UserAutocastStep {
  with: Statement;
  /** Append the FP8 context to the header at this offset (the header's ':'). */
  headerAt?: number;
  /** Else wrap these statements of the block. */
  first?: Statement;
  last?: Statement;
}

/** A context a script binds to a torch autocast (or its CPU stand-in, nullcontext). */
const TORCH_AUTOCAST_CALL = /(^|[^\w.])((torch\.)?(cuda\.|cpu\.)?amp\.autocast|torch\.autocast|autocast|[A-Za-z_][\w.]*\.autocast)\s*\(/;
const CONTEXT_BINDING = /(^|[^\w.])(nullcontext|contextlib\.nullcontext)\s*\(|(^|[^\w.])((torch\.)?(cuda\.|cpu\.)?amp\.autocast|torch\.autocast|autocast)\s*\(/;
const TE_CALL = /\b(te|transformer_engine|te_pytorch)\.|fp8_autocast/;

/** The top-level items of a `with` header (`with a, b as c:` -> ["a", "b as c"]), or undefined when parenthesised. */
function withItems(header: string): string[] | undefined {
  const inner = header.replace(/^with\s+/, '').replace(/:\s*$/, '').trim();
  if (inner.startsWith('(')) return undefined;
  const items: string[] = [];
  let depth = 0;
  let from = 0;
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i];
    if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c)) depth--;
    else if (c === ',' && depth === 0) { items.push(inner.slice(from, i).trim()); from = i + 1; }
  }
  items.push(inner.slice(from).trim());
  return items.map((it) => it.replace(/\s+as\s+[\w.]+$/, '').trim());
}

/** Names (`ctx`, `self.ctx`) the file binds somewhere to an autocast or nullcontext: one pass over its statements. */
function autocastBindings(model: SourceModel, statements: readonly Statement[]): Set<string> {
  const out = new Set<string>();
  for (const s of statements) {
    if (s.isHeader) continue;
    const m = /^([A-Za-z_][\w.]*)\s*(:[^=]*)?=(?!=)\s*([\s\S]*)$/.exec(statementText(model, s));
    if (m && CONTEXT_BINDING.test(m[3]) && !TE_CALL.test(m[3])) out.add(m[1]);
  }
  return out;
}

/** Training steps that already run under the script's own autocast (see UserAutocastStep). */
export function userAutocastSteps(model: SourceModel, regions: readonly AutocastRegion[] = []): UserAutocastStep[] {
  const out: UserAutocastStep[] = [];
  const all = allStatements(model);
  const fp8Starts = new Set(regions.map((r) => r.span.startOffset));
  let bound: Set<string> | undefined;
  for (const w of all) {
    if (!w.isHeader) continue;
    const head = statementText(model, w);
    if (!/^with\b/.test(head) || fp8Starts.has(w.start) || TE_CALL.test(head) || head.includes(CONTEXT_FACTORY)) continue;
    const items = withItems(head);
    const user = items
      ? items.some((it) => (TORCH_AUTOCAST_CALL.test(it) && !TE_CALL.test(it)) || (/^[A-Za-z_][\w.]*$/.test(it) && (bound ??= autocastBindings(model, all)).has(it)))
      : TORCH_AUTOCAST_CALL.test(head) && !TE_CALL.test(head);
    if (!user) continue;
    // A training step: a loop around it differentiates, and no no_grad / inference_mode block holds it (evaluation).
    if (!inside(w, (s) => /^(async\s+)?(for|while)\b/.test(statementText(model, s)) && s.isHeader && BACKWARD_RE.test(fullText(model, s)))) continue;
    if (inside(w, (s) => /^with\b.*\b(no_grad|inference_mode)\s*\(/.test(statementText(model, s)))) continue;
    if (inside(w, (s) => fp8Starts.has(s.start))) continue;
    const body = w.children;
    const b = body.findIndex((s) => BACKWARD_RE.test(fullText(model, s)));
    if (b < 0) {
      if (body.some((s) => OPTIMIZER_OP_RE.test(fullText(model, s)))) continue;
      if (items && model.text.charAt(w.end - 1) === ':') out.push({ with: w, headerAt: w.end - 1 });
      else out.push({ with: w, first: body[0], last: body[body.length - 1] });
      continue;
    }
    // backward() inside the script's autocast block: the FP8 context around the forward statements before it.
    if (b === 0 || body[b].isHeader) continue;
    const range = forwardRange(model, body, b);
    if (range) out.push({ with: w, ...range });
  }
  return out;
}

/** The edit that puts the FP8 context inside a script's own autocast. */
export function nestInUserAutocast(model: SourceModel, step: UserAutocastStep): TextEdit {
  const header = `${CONTEXT_FACTORY}(inside_autocast=True)`;
  if (step.headerAt !== undefined) return replace(step.headerAt, step.headerAt, `, ${header}`);
  return wrapStatements(model, step.first!, step.last!, header);
}

/** Whether some ancestor of `s` satisfies `pred`. */
function inside(s: Statement, pred: (a: Statement) => boolean): boolean {
  for (let p = s.parent; p; p = p.parent) if (pred(p)) return true;
  return false;
}

/**
 * The statements of a selection to wrap: the siblings it covers in their common block, ending before the first
 * backward() or optimizer step among them (those stay outside the autocast block).
 */
export function selectedStatements(
  model: SourceModel, sel: { startOffset: number; endOffset: number }, regions: readonly AutocastRegion[] = [],
): { first: Statement; last: Statement } | string {
  let a = statementAt(model, sel.startOffset);
  let b = statementAt(model, Math.max(sel.startOffset, sel.endOffset - 1));
  if (!a || !b) return 'the selection holds no statement.';
  const depth = (s: Statement) => { let d = 0; for (let p = s.parent; p; p = p.parent) d++; return d; };
  while (depth(a) > depth(b)) a = a.parent!;
  while (depth(b) > depth(a)) b = b.parent!;
  while (a.parent !== b.parent) { a = a.parent!; b = b.parent!; }
  const siblings = siblingsOf(model, a);
  const from = siblings.indexOf(a);
  let to = siblings.indexOf(b);
  for (let i = from; i <= to; i++) {
    const t = fullText(model, siblings[i]);
    if (BACKWARD_RE.test(t) || /\.step\s*\(/.test(t)) { to = i - 1; break; }
  }
  if (to < from) return 'the selection starts with backward() or an optimizer step, which must stay outside FP8 autocast.';
  const first = siblings[from];
  const last = siblings[to];
  // Only statements that run the model: not imports or definitions, not half of an if/try statement, not a region
  // that already is (or is inside) FP8 autocast, not the model's constructor.
  for (let i = from; i <= to; i++) {
    const head = statementText(model, siblings[i]);
    if (/^(import|from)\s/.test(head)) return 'the selection holds an import, which must not run inside a with block.';
    if (/^(async\s+def|def|class)\s|^@/.test(head)) return 'the selection holds a definition; select the statements that run the model.';
  }
  if (/^(else|elif|except|finally)\b/.test(statementText(model, first))) return 'the selection starts inside an if/try statement; select the whole statement.';
  const next = siblings[to + 1];
  if (next && /^(else|elif|except|finally)\b/.test(statementText(model, next))) return 'the selection ends inside an if/try statement (its else/except part is not selected); select the whole statement.';
  const from0 = first.start;
  const to0 = blockEnd(last);
  if (regions.some((r) => (r.span.startOffset <= from0 && to0 <= r.span.endOffset) || (from0 <= r.span.startOffset && r.span.startOffset < to0))) {
    return 'the selection already is, or holds, an FP8 autocast region.';
  }
  for (let p = first.parent; p; p = p.parent) {
    if (/^(async\s+)?def\s+__init__\s*\(/.test(statementText(model, p))) return "the selection is in __init__, which builds the model; FP8 autocast belongs around the forward pass of the training step.";
    if (/^(async\s+)?def\s/.test(statementText(model, p))) break;
  }
  return { first, last };
}

/** The `with` header that turns FP8 on: always the wrapper's context factory, so the file also runs without TE. */
export function fp8ContextHeader(): string {
  return `${CONTEXT_FACTORY}()`;
}

/**
 * PL301: moves `.backward()` (and the optimizer steps after it) out of the autocast block, when they are the block's
 * last statements. Anything else after backward() inside the block would change order if moved: refused, with why.
 */
export function moveBackwardOut(ctx: FixContext, region: AutocastRegion): FixOutcome {
  const { model } = ctx;
  const withStmt = statementAt(model, region.span.startOffset);
  if (!withStmt || !withStmt.isHeader || !/^(async\s+)?with\b/.test(statementText(model, withStmt))) {
    return refuse('No automatic fix: the autocast block is not a plain `with` statement with an indented body.');
  }
  if (hasSeveralItems(statementText(model, withStmt))) {
    return refuse('No automatic fix: this `with` also enters other context managers; moving backward() out would take it out of those too.');
  }
  const body = withStmt.children;
  const k = body.findIndex((s) => BACKWARD_RE.test(fullText(model, s)));
  if (k < 0) return refuse('No automatic fix: backward() was not found in the block.');
  const line = (s: Statement) => s.firstLine + 1;
  if (body[k].isHeader) {
    return refuse(`No automatic fix: backward() is nested inside \`${statementText(model, body[k]).slice(0, 40)}\` (line ${line(body[k])}) within the autocast block; move it out by hand.`);
  }
  for (const s of body.slice(k + 1)) {
    const t = statementText(model, s);
    if (s.isHeader || !(BACKWARD_RE.test(t) || OPTIMIZER_OP_RE.test(t))) {
      return refuse(`No automatic fix: \`${t.slice(0, 50)}\` (line ${line(s)}) follows backward() inside the autocast block; moving backward() after the block would run it after that statement.`);
    }
  }
  if (k === 0) {
    return refuse('No automatic fix: the block holds only backward() and optimizer steps; the forward pass is elsewhere. Remove the `with` by hand.');
  }
  const moved = body.slice(k);
  const unit = moved[0].indent.slice(withStmt.indent.length) || indentUnit(model);
  const end = blockEnd(moved[moved.length - 1]);
  const text = dedentLines(model, moved[0].firstLine, lineOf(model.lineStarts, end - 1), unit);
  // Same text, one level out: the lines already sit right after the block's last remaining statement.
  return outcome([{
    id: `PL301:${region.ownerFunction ?? ''}:${statementText(model, moved[0]).slice(0, 40)}`, title: 'Move backward() out of the FP8 autocast block',
    kind: 'quickfix', codes: ['PL301'], safe: false, isPreferred: true, edits: [replace(moved[0].lineStart, end, text)],
  }]);
}

/** `with a(), b():` has two items (a top-level comma in the header). */
function hasSeveralItems(header: string): boolean {
  let depth = 0;
  for (const c of header.replace(/#.*$/, '')) {
    if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c)) depth--;
    else if (c === ',' && depth === 0) return true;
  }
  return false;
}
