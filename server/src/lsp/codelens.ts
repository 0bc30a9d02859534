/**
 * The model-level FP8 estimate as a CodeLens (issue 22, item 4): one lens on the `class` line of the model a file
 * builds, saying the predicted step speedup (analysis/gain-layer.ts predictModel) before anything is changed. Computed
 * from the document's existing analysis (its IR and settings); no analysis of its own.
 */
import type { CodeLens } from 'vscode-languageserver/node';
import type { PrecisionLensSettings } from '../../../common/settings';
import { attentionLines, compiledLines, predictModel, torchaoLines, type ModelPrediction } from '../analysis/gain-layer';
import type { ClassInfo, ModelIR } from '../analysis/ir';
import { lineStartsOf } from '../engine/lines';

/** The client command the lens runs: shows the prediction's details (registered in client/src/extension.ts). */
export const SHOW_GAIN_COMMAND = 'precisionLens.showGainEstimate';

/**
 * The model class of a file: the class that builds the lm-head, else the class that builds the most Linears (ties:
 * the later class, as a model is usually defined after its parts). undefined when no class builds a Linear.
 */
export function modelClass(ir: ModelIR): ClassInfo | undefined {
  const byName = (name: string | undefined) => (name ? ir.classes.find((c) => c.name === name) : undefined);
  const head = byName(ir.layers.find((l) => l.role === 'lm_head' && l.ownerClass)?.ownerClass);
  if (head) return head;
  const count = new Map<string, number>();
  for (const l of ir.layers) {
    if ((l.kind === 'linear' || l.kind === 'parallel-linear') && l.ownerClass) count.set(l.ownerClass, (count.get(l.ownerClass) ?? 0) + 1);
  }
  let best: ClassInfo | undefined;
  let most = 0;
  for (const c of ir.classes) {
    const n = count.get(c.name) ?? 0;
    if (n > 0 && n >= most) { best = c; most = n; }
  }
  return best;
}

/**
 * The lens's title: `FP8 on NVIDIA H200: about 1.3x per step at 16k tokens · 6 blocks · tokens assumed`, or
 * `FP8 loses here on NVIDIA H200: about 0.49x per step at 8192 tokens (launch-bound) · 12 blocks`.
 */
export function gainLensTitle(p: ModelPrediction): string {
  // "FP8 on the H200: FP8 loses here: ..." would say FP8 twice: the losing verdict leads instead.
  const loses = /^FP8 loses here: /.exec(p.short);
  const head = loses ? `FP8 loses here on ${p.gpu}: ${p.short.slice(loses[0].length)}` : `FP8 on ${p.gpu}: ${p.short}`;
  return `${head} · ${p.blocks.count} blocks${p.blocks.from ? '' : ' assumed'}${p.tokens.assumed ? ' · tokens assumed' : ''}`;
}

/** The line of the `class` keyword (after any decorators) of a class. */
function classLine(text: string, cls: ClassInfo): number {
  const starts = lineStartsOf(text);
  for (let line = cls.span.startLine; line <= cls.span.endLine && line < starts.length; line++) {
    const end = line + 1 < starts.length ? starts[line + 1] : text.length;
    if (/^\s*class\s/.test(text.slice(starts[line], end))) return line;
  }
  return cls.span.startLine;
}

/**
 * The document's lenses: one on the model class with the predicted step speedup, or none (no prediction, no class).
 * `compiles`: the project calls torch.compile (the workspace facts), which the details then say the estimate is not.
 */
export function modelCodeLenses(text: string, ir: ModelIR, settings: PrecisionLensSettings, compiles?: boolean): CodeLens[] {
  const cls = modelClass(ir);
  if (!cls) return [];
  const prediction = predictModel(ir, settings);
  if (!prediction) return [];
  const line = classLine(text, cls);
  const title = gainLensTitle(prediction);
  return [{
    range: { start: { line, character: 0 }, end: { line, character: 0 } },
    command: { title, command: SHOW_GAIN_COMMAND, arguments: [title, [...prediction.details, ...attentionLines(ir), ...torchaoLines(ir, settings), ...compiledLines(compiles)]] },
  }];
}
