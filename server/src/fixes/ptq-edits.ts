/**
 * Exact edits for PL6xx findings where one exists (ptq.ts dispatches here); each says why not where none does.
 *  PL601 (ModelOpt): the disabling wildcard entry for the lm-head found by role, appended to the config's quant_cfg:
 *        after the copy of a library config (`cfg = copy.deepcopy(mtq.FP8_DEFAULT_CFG)`: ModelOpt 0.47's list form,
 *        `cfg["quant_cfg"].append({"quantizer_name": "*decoder*", "enable": False})`, or the dict form the file
 *        already writes) or inside a literal quant_cfg (its list or dict);
 *  PL602 no forward_loop, a validation loader in scope: a calibration function over 512 of its samples, passed;
 *  PL603 the literal bound of the calibration loop set to 512 samples (in batches when the loader's size is known);
 *  PL604 E5M2 written as a literal: num_bits=(5, 2) -> (4, 3), torch.float8_e5m2 -> torch.float8_e4m3fn;
 *  PL605 the quantize statement guarded by the GPU's compute capability (`torch.cuda.get_device_capability()`):
 *        where the format runs it quantizes as written, elsewhere the model stays in BF16 and one line says why;
 *  PL606 torch.save(model.state_dict(), path) -> mto.save(model, path), importing modelopt.torch.opt as mto.
 * Pure: text + IR in, text edits out.
 */
import type { Layer, PtqQuantizeCall, PtqSave } from '../analysis/ir';
import { fnmatch } from '../analysis/ptq';
import { CALIB_SIZE } from '../analysis/ptq-catalogue';
import { wildcardFor } from '../rules/ptq';
import { addImport } from './imports';
import { statementAt } from './source';
import { outcome, refuse, type Fix, type FixContext, type FixOutcome } from './types';

const TARGET_SAMPLES = CALIB_SIZE.sweetSpot[0];

/** Names of held-out data sources, in order of preference: what calibration should read. */
export const EVAL_SOURCE = /\b((?:val|valid|validation|eval|evaluation|test|dev|calib|calibration|holdout)_?(?:loader|dataloader|dl|data|dataset|batches|set|iter)|(?:val|eval|calib)_ds)\b/;

function quickfix(id: string, title: string, code: Fix['codes'][number], edits: Fix['edits']): FixOutcome {
  return outcome([{ id, title, kind: 'quickfix', codes: [code], safe: false, isPreferred: true, edits }]);
}

/** The single match of `re` in text[from, to), as absolute offsets; undefined when there are none or several. */
function onlyMatch(text: string, from: number, to: number, re: RegExp): { start: number; end: number; text: string } | undefined {
  const hits = [...text.slice(from, to).matchAll(new RegExp(re.source, `${re.flags.replace('g', '')}g`))];
  if (hits.length !== 1) return undefined;
  const m = hits[0];
  return { start: from + (m.index ?? 0), end: from + (m.index ?? 0) + m[0].length, text: m[0] };
}

// ---------------------------------------------------------------------------------------------------------------
// PL603: the calibration bound

/** The literal that sets the bound: in the loop's own text, or the one module/function constant it names. */
function boundLiteral(ctx: FixContext, span: { startOffset: number; endOffset: number }, count: number): { start: number; end: number; name?: string } | undefined {
  const isCount = (t: string) => Number(t.replace(/_/g, '')) === count;
  const inLoop = onlyMatch(ctx.text, span.startOffset, span.endOffset, /(?<![\w.])\d[\d_]*(?![\w.])/);
  if (inLoop && isCount(inLoop.text)) return inLoop;
  const names = [...ctx.text.slice(span.startOffset, span.endOffset).matchAll(/\b[A-Za-z_]\w*\b/g)].map((m) => m[0]);
  for (const name of new Set(names)) {
    const defs = [...ctx.text.matchAll(new RegExp(String.raw`^[ \t]*${name}\s*(?::\s*int\s*)?=\s*(\d[\d_]*)[ \t]*(?:#.*)?$`, 'gm'))];
    if (defs.length !== 1 || !isCount(defs[0][1])) continue;
    const start = (defs[0].index ?? 0) + defs[0][0].indexOf(defs[0][1], defs[0][0].indexOf('='));
    return { start, end: start + defs[0][1].length, name };
  }
  return undefined;
}

export function calibrationBoundFix(ctx: FixContext, call: PtqQuantizeCall | undefined): FixOutcome {
  const size = call?.forwardLoop?.size;
  if (!size) return refuse('No automatic fix: the calibration loop\'s bound could not be read.');
  const target = size.unit === 'samples' ? TARGET_SAMPLES : size.batchSize ? Math.ceil(TARGET_SAMPLES / size.batchSize) : undefined;
  if (target === undefined) {
    return refuse(`No automatic fix: the loader's batch size is unknown, so no batch count is known to be ${TARGET_SAMPLES} samples; bound the loop to ${TARGET_SAMPLES} samples.`);
  }
  const lit = boundLiteral(ctx, size.span, size.count);
  if (!lit) return refuse(`No automatic fix: the bound ${size.text} is not a literal of this file; set it to ${TARGET_SAMPLES} samples.`);
  const what = size.unit === 'samples' ? `${target} samples` : `${target} batches of ${size.batchSize} (${target * size.batchSize!} samples)`;
  return quickfix('ptq-calib-size', `Calibrate on ${what}${lit.name ? `: ${lit.name} = ${target}` : ''}`, 'PL603', [{ startOffset: lit.start, endOffset: lit.end, newText: String(target) }]);
}

// ---------------------------------------------------------------------------------------------------------------
// PL604: E5M2 -> E4M3

export function e4m3Fix(ctx: FixContext, call: PtqQuantizeCall | undefined): FixOutcome {
  const at = call?.config?.e5m2At;
  if (!at) return refuse('No automatic fix: the E5M2 choice is not written in this file.');
  const bits = onlyMatch(ctx.text, at.startOffset, at.endOffset, /\(\s*5\s*,\s*2\s*\)/);
  if (call?.library === 'modelopt' && bits) {
    return quickfix('ptq-e4m3', 'Use E4M3: num_bits=(4, 3)', 'PL604', [{ startOffset: bits.start, endOffset: bits.end, newText: '(4, 3)' }]);
  }
  const dtype = onlyMatch(ctx.text, at.startOffset, at.endOffset, /\bfloat8_e5m2\b/);
  if (dtype) return quickfix('ptq-e4m3', 'Use E4M3: float8_e4m3fn', 'PL604', [{ startOffset: dtype.start, endOffset: dtype.end, newText: 'float8_e4m3fn' }]);
  return refuse('No automatic fix: E5M2 is not a literal here; use E4M3, num_bits=(4, 3) (ModelOpt) or torch.float8_e4m3fn (torchao).');
}

// ---------------------------------------------------------------------------------------------------------------
// PL606: torch.save(model.state_dict(), path) -> mto.save(model, path)

const STATE_DICT_SAVE = /^([A-Za-z_][\w.]*)\.save\(\s*([A-Za-z_][\w.]*)\.state_dict\(\s*\)\s*,\s*((?:[^,()'"]|'[^']*'|"[^"]*"|\([^()]*\))+?)\s*,?\s*\)$/s;

export function modeloptSaveFix(ctx: FixContext, save: PtqSave | undefined): FixOutcome {
  if (!save) return refuse('No automatic fix: the save call could not be read.');
  const text = ctx.text.slice(save.span.startOffset, save.span.endOffset);
  const m = STATE_DICT_SAVE.exec(text);
  if (!m) return refuse('No automatic fix: this torch.save has more than a state_dict and a path; save with mto.save(model, path) instead.');
  const bound = ctx.ir.imports.find((b) => b.target === 'modelopt.torch.opt' && !b.guarded)?.local;
  const taken = ctx.ir.imports.some((b) => b.local === 'mto' && b.target !== 'modelopt.torch.opt') || /^\s*mto\s*=/m.test(ctx.text);
  if (!bound && taken) return refuse('No automatic fix: the name mto is taken in this file; save with modelopt.torch.opt.save(model, path).');
  const mto = bound ?? 'mto';
  const edits = [{ startOffset: save.span.startOffset, endOffset: save.span.endOffset, newText: `${mto}.save(${m[2]}, ${m[3].trim()})` }];
  if (!bound) edits.unshift(addImport(ctx.model, 'import modelopt.torch.opt as mto'));
  return quickfix('ptq-mto-save', `Save with ${mto}.save(${m[2]}, ...) to keep the quantizer state`, 'PL606', edits.sort((a, b) => a.startOffset - b.startOffset));
}

// ---------------------------------------------------------------------------------------------------------------
// PL601 (ModelOpt): the disabling wildcard

/** Offset of the bracket that closes the one opening at `open`, skipping strings and comments; -1 when unbalanced. */
function closingBracket(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (c === '"' || c === '\'') {
      const end = text.indexOf(c, i + 1);
      if (end < 0) return -1;
      i = end;
    } else if (c === '#') {
      const nl = text.indexOf('\n', i);
      i = nl < 0 ? text.length : nl;
    } else if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c) && --depth === 0) return i;
  }
  return -1;
}

/** An entry added at the end of a literal quant_cfg (list: an ordered entry; dict: a wildcard key). */
function literalEntryEdit(ctx: FixContext, from: number, to: number, wildcard: string): Fix['edits'] | undefined {
  const key = onlyMatch(ctx.text, from, to, /["']quant_cfg["']\s*:\s*[[{]/);
  if (!key) return undefined;
  const open = key.end - 1;
  const close = closingBracket(ctx.text, open);
  if (close < 0 || close > to) return undefined;
  const entry = ctx.text[open] === '['
    ? `{"quantizer_name": "${wildcard}", "enable": False}`
    : `"${wildcard}": {"enable": False}`;
  let end = close;
  while (end > open + 1 && /\s/.test(ctx.text[end - 1])) end--;
  const inner = ctx.text.slice(open + 1, end);
  const multiline = /\n/.test(ctx.text.slice(open, close));
  const lineStart = ctx.text.lastIndexOf('\n', close) + 1;
  const closeIndent = /^[ \t]*/.exec(ctx.text.slice(lineStart))![0];
  const itemIndent = /\n([ \t]*)\S/.exec(ctx.text.slice(open, close))?.[1] ?? `${closeIndent}    `;
  const comma = inner.trim() === '' || inner.trimEnd().endsWith(',') ? '' : ',';
  const newText = multiline ? `${comma}\n${itemIndent}${entry},` : `${comma}${inner.trim() ? ' ' : ''}${entry}`;
  return [{ startOffset: end, endOffset: end, newText }];
}

/** cfg = copy.deepcopy(mtq.FP8_DEFAULT_CFG) (or a copy written otherwise) before the call: a line after its last change. */
function copiedConfigEdit(ctx: FixContext, call: PtqQuantizeCall, wildcard: string): Fix['edits'] | undefined | string {
  const cfg = call.config!;
  const name = cfg.text.trim();
  if (!/^[A-Za-z_]\w*$/.test(name) || !cfg.evidence.length) return undefined;
  const assign = ctx.text.slice(cfg.evidence[0].startOffset, cfg.evidence[0].endOffset);
  const rhs = /^[A-Za-z_]\w*\s*(?::[^=]+)?=\s*([\s\S]*)$/.exec(assign)?.[1] ?? '';
  if (/^\s*[{]/.test(rhs)) return literalEntryEdit(ctx, cfg.evidence[0].startOffset, cfg.evidence[0].endOffset, wildcard);
  if (!/\b(deepcopy|copy|dict)\s*\(|\.copy\s*\(\s*\)/.test(rhs)) return `No automatic fix: ${name} is the library's own config object, changing it would change it for every user; copy it first (copy.deepcopy).`;
  const last = cfg.evidence.reduce((a, b) => (b.endOffset > a.endOffset ? b : a));
  if (last.endOffset > call.span.startOffset) return undefined;
  const lineEnd = ctx.text.indexOf('\n', last.endOffset);
  const at = lineEnd < 0 ? ctx.text.length : lineEnd + 1;
  const indent = /^[ \t]*/.exec(ctx.text.slice(ctx.text.lastIndexOf('\n', last.startOffset) + 1))![0];
  // The file's own form decides; a plain copy gets ModelOpt 0.47's (the index's version) list form.
  const dictForm = cfg.evidence.some((e) => /\[\s*["']quant_cfg["']\s*\]\s*(\[|\.update\b)/.test(ctx.text.slice(e.startOffset, e.endOffset)));
  const line = dictForm
    ? `${name}["quant_cfg"]["${wildcard}"] = {"enable": False}`
    : `${name}["quant_cfg"].append({"quantizer_name": "${wildcard}", "enable": False})`;
  return [{ startOffset: at, endOffset: at, newText: `${lineEnd < 0 ? '\n' : ''}${indent}${line}\n` }];
}

export function modeloptHeadFix(ctx: FixContext, call: PtqQuantizeCall, layer: Layer): FixOutcome {
  // The wildcard the rule's message names; refused where it would also switch off another layer of this file.
  const wildcard = wildcardFor(layer);
  const bare = wildcard.replace(/^\*|\.?\*$/g, '');
  const modulePath = (l: Layer) => (l.path ?? l.name).replace(/^self\./, '').replace(/\[\*\]/g, '.0');
  const other = ctx.ir.layers.find((l) => l !== layer && !l.isTe && fnmatch(`${modulePath(l)}.weight_quantizer`, wildcard));
  if (other) return refuse(`No automatic fix: "${wildcard}" would also disable ${other.path ?? other.name}; add a wildcard that matches only the head.`);
  const cfg = call.config;
  if (!cfg || cfg.opaque) return refuse(`No automatic fix: the config is not readable here (${cfg?.opaque ?? 'none passed'}); add {"quantizer_name": "${wildcard}", "enable": False} to its quant_cfg.`);
  if (!/^\s*\{/.test(cfg.text) && !/^[A-Za-z_]\w*$/.test(cfg.text.trim())) {
    return refuse(`No automatic fix: the call passes ${cfg.text} itself; copy it (copy.deepcopy) and add {"quantizer_name": "${wildcard}", "enable": False} to the copy's quant_cfg.`);
  }
  const edits = /^\s*\{/.test(cfg.text)
    ? literalEntryEdit(ctx, cfg.span.startOffset, cfg.span.endOffset, wildcard)
    : copiedConfigEdit(ctx, call, wildcard);
  if (typeof edits === 'string') return refuse(edits);
  if (!edits) return refuse(`No automatic fix: the config's quant_cfg could not be located exactly; add {"quantizer_name": "${wildcard}", "enable": False} to it.`);
  return quickfix('ptq-modelopt-disable', `Keep ${bare} out of quantization: "${wildcard}" disabled in quant_cfg`, 'PL601', edits);
}

// ---------------------------------------------------------------------------------------------------------------
// PL602: no forward_loop, a held-out loader in scope

const NO_LOOP_REFUSAL = 'No automatic fix: no validation loader in scope; pass forward_loop=a function that runs the model on ~512 samples (the source action "Quantize to FP8 after training" writes one).';

export function calibrationLoopFix(ctx: FixContext, call: PtqQuantizeCall | undefined): FixOutcome {
  if (!call || call.forwardLoop) return refuse(`No automatic fix: ${call?.forwardLoop?.fnName ?? 'the forward_loop'} must run the model it is given (call m(batch) in it).`);
  const stmt = statementAt(ctx.model, call.span.startOffset);
  if (!stmt) return refuse(NO_LOOP_REFUSAL);
  const before = ctx.text.slice(0, stmt.lineStart);
  // Assigned at module level or at the call's own indentation before it (its function), named as held-out data.
  const defs = [...before.matchAll(/^([ \t]*)([A-Za-z_]\w*)\s*=(?!=)/gm)].filter((m) => (m[1] === '' || m[1] === stmt.indent) && EVAL_SOURCE.test(m[2]) && EVAL_SOURCE.exec(m[2])![1] === m[2]);
  const loader = defs.length ? defs[defs.length - 1][2] : undefined;
  if (!loader) return refuse(NO_LOOP_REFUSAL);
  const close = call.span.endOffset - 1;
  if (ctx.text[close] !== ')') return refuse('No automatic fix: the quantize call could not be read to its closing parenthesis.');
  const bs = new RegExp(String.raw`^[ \t]*${loader}\s*=.*\bbatch_size\s*=\s*(\d+)`, 'm').exec(before)?.[1];
  const batches = bs ? Math.ceil(TARGET_SAMPLES / Number(bs)) : 64;
  const what = bs ? `${batches} batches of ${loader} (${batches * Number(bs)} samples)` : `${batches} batches of ${loader}`;
  let name = 'calibrate';
  for (let k = 2; new RegExp(String.raw`\b${name}\b`).test(ctx.text); k++) name = `calibrate_${k}`;
  const i = stmt.indent;
  const fn = [
    `${i}def ${name}(m):`,
    `${i}    """forward_loop for ${call.callee}: runs the model on ${what}."""`,
    `${i}    for i, batch in enumerate(${loader}):`,
    `${i}        if i >= ${batches}:`,
    `${i}            break`,
    `${i}        batch = batch[0] if isinstance(batch, (tuple, list)) else batch`,
    `${i}        m(**batch) if isinstance(batch, dict) else m(batch)`,
  ].join('\n');
  // PEP 8: two blank lines around a module-level function, one inside a function.
  const top = i === '';
  const lines = before.split('\n').slice(0, -1);
  let blank = 0;
  while (blank < lines.length && lines[lines.length - 1 - blank].trim() === '') blank++;
  const lead = top && lines.length > blank ? '\n'.repeat(Math.max(0, 2 - blank)) : '';
  const fnText = `${lead}${fn}\n${top ? '\n\n' : '\n'}`;
  let end = close;
  while (end > call.span.startOffset && /\s/.test(ctx.text[end - 1])) end--;
  const comma = ctx.text[end - 1] === ',' || ctx.text[end - 1] === '(' ? '' : ',';
  return quickfix('ptq-forward-loop', `Calibrate on ${what}: forward_loop=${name}`, 'PL602', [
    { startOffset: stmt.lineStart, endOffset: stmt.lineStart, newText: fnText },
    { startOffset: end, endOffset: end, newText: `${comma} forward_loop=${name}` },
  ]);
}

// ---------------------------------------------------------------------------------------------------------------
// PL605: the format guarded by the GPU's compute capability

/** The Python test for a capability need: `>= (8, 9)`, with the major pinned for SM 10.x-only formats. */
function capabilityTest(torch: string, sm: { min: [number, number]; major?: number }): string {
  const cap = `${torch}.cuda.get_device_capability()`;
  const min = `${cap} >= (${sm.min[0]}, ${sm.min[1]})`;
  return `${torch}.cuda.is_available() and ${sm.major !== undefined ? `${cap}[0] == ${sm.major}` : min}`;
}

/**
 * The quantize statement (an expression statement or an assignment of the call) indented under
 * `if <the GPU runs the format>:`, with an `else:` that leaves the model unquantized (BF16) and prints why, naming
 * what the target runs instead.
 */
export function gpuGuardFix(ctx: FixContext, call: PtqQuantizeCall | undefined, target: string, instead: string): FixOutcome {
  const cfg = call?.config;
  if (!call || !cfg?.sm) return refuse('No automatic fix: the config\'s format is not one whose GPU need is known; choose a format the target GPU runs.');
  const torch = ctx.ir.imports.find((b) => b.target === 'torch' && !b.guarded)?.local;
  if (!torch) return refuse('No automatic fix: the file does not import torch under a name the capability test could use.');
  const stmt = statementAt(ctx.model, call.span.startOffset);
  if (!stmt || stmt.isHeader) return refuse('No automatic fix: the quantize call is not a statement of its own.');
  const text = ctx.text.slice(stmt.start, stmt.end);
  const callText = ctx.text.slice(call.span.startOffset, call.span.endOffset);
  const assigned = /^[A-Za-z_][\w.]*\s*=(?!=)\s*/.exec(text);
  if (text !== callText && !(assigned && text.slice(assigned[0].length) === callText)) {
    return refuse('No automatic fix: the quantize call is part of a larger expression; guard it by torch.cuda.get_device_capability() by hand.');
  }
  for (let l = stmt.firstLine + 1; l <= stmt.lastLine; l++) {
    if (ctx.model.linesInString.has(l)) return refuse('No automatic fix: the statement spans a multi-line string, which re-indenting would change.');
  }
  const i = stmt.indent;
  const body = ctx.text.slice(stmt.lineStart, stmt.end).split('\n').map((line) => (line.trim() ? `    ${line}` : line)).join('\n');
  const what = cfg.format ?? cfg.base ?? 'this format';
  const why = `${what} needs ${cfg.needs}, which this GPU lacks: the model stays in BF16 (on ${target}, ${instead})`;
  const newText = [
    `${i}if ${capabilityTest(torch, cfg.sm)}:`,
    body,
    `${i}else:`,
    `${i}    print(${JSON.stringify(`PTQ: ${why}`)}, flush=True)`,
  ].join('\n');
  return quickfix('ptq-gpu-guard', `Quantize only where the GPU runs ${what} (BF16 elsewhere)`, 'PL605', [{ startOffset: stmt.lineStart, endOffset: stmt.end, newText }]);
}
