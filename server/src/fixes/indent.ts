/**
 * Indentation: fixes that wrap statements in a `with` or move them out of one must produce exactly the indentation
 * the file already uses (tabs or N spaces), and must not touch the inside of multi-line strings.
 */
import { allStatements, type SourceModel } from './source';

/**
 * The file's indentation step: a tab if any block is tab-indented, else the smallest nesting step, else 4 spaces.
 * Remembered per model: every fix of a file asks (one per finding for the fix titles), and it walks every statement.
 */
export function indentUnit(model: SourceModel): string {
  let unit = units.get(model);
  if (unit === undefined) units.set(model, (unit = indentUnitUncached(model)));
  return unit;
}

const units = new WeakMap<SourceModel, string>();

function indentUnitUncached(model: SourceModel): string {
  let best = 0;
  for (const s of allStatements(model)) {
    if (!s.parent) continue;
    if (s.indent.includes('\t')) return '\t';
    const step = s.indent.length - s.parent.indent.length;
    if (step > 0 && (best === 0 || step < best)) best = step;
  }
  return ' '.repeat(best || 4);
}

/** The physical lines [fromLine, toLine] with `prefix` added (blank lines and string content left alone). */
export function indentLines(model: SourceModel, fromLine: number, toLine: number, prefix: string): string {
  let out = '';
  for (let l = fromLine; l <= toLine; l++) {
    const line = physicalLine(model, l);
    out += model.linesInString.has(l) || /^\s*$/.test(line) ? line : prefix + line;
  }
  return out;
}

/** The physical lines [fromLine, toLine] with up to one `unit` of leading indentation removed. */
export function dedentLines(model: SourceModel, fromLine: number, toLine: number, unit: string): string {
  let out = '';
  for (let l = fromLine; l <= toLine; l++) {
    const line = physicalLine(model, l);
    if (model.linesInString.has(l)) { out += line; continue; }
    out += line.startsWith(unit) ? line.slice(unit.length) : line.replace(/^[ \t]+/, (ws) => ws.slice(Math.min(ws.length, unit.length)));
  }
  return out;
}

/** Physical line `l` including its newline. */
export function physicalLine(model: SourceModel, l: number): string {
  const start = model.lineStarts[l];
  const end = l + 1 < model.lineStarts.length ? model.lineStarts[l + 1] : model.text.length;
  return model.text.slice(start, end);
}

/** Offset of the start of physical line `l` (or text.length past the end). */
export function lineStartOffset(model: SourceModel, l: number): number {
  return l < model.lineStarts.length ? model.lineStarts[l] : model.text.length;
}

/** The newline style of the file. */
let lastEol: { text: string; eol: string } | undefined;

export function eol(text: string): string {
  // Asked once per finding of the same text: remember the answer instead of rescanning a large file each time.
  if (lastEol?.text !== text) lastEol = { text, eol: text.includes('\r\n') ? '\r\n' : '\n' };
  return lastEol.eol;
}
