/**
 * Evidence with locations for a finding's relatedInformation: the weight-tie statement, the config field a dimension
 * defaults to, the call of a layer in forward (its return). Reads the IR and the text; pure.
 */
import type { Dim, Layer, ModelIR, Span } from '../analysis/ir';
import { lineStartsOf, pointAt } from '../engine/lines';
import type { Evidence } from './types';

/** A span over [start, end) of `text` (line table built once per text). */
export class SpanMaker {
  private starts?: number[];
  constructor(private readonly text: string) {}

  span(start: number, end: number): Span {
    this.starts ??= lineStartsOf(this.text);
    const a = pointAt(this.starts, start);
    const b = pointAt(this.starts, end);
    return { startLine: a.row, startColumn: a.column, endLine: b.row, endColumn: b.column, startOffset: start, endOffset: end };
  }

  /** The line containing `offset`, without its indentation. */
  lineSpan(offset: number): Span {
    const lineStart = this.text.lastIndexOf('\n', offset - 1) + 1;
    let lineEnd = this.text.indexOf('\n', offset);
    if (lineEnd < 0) lineEnd = this.text.length;
    const indent = /^[ \t]*/.exec(this.text.slice(lineStart, lineEnd))![0].length;
    return this.span(lineStart + indent, lineEnd);
  }
}

function bare(name: string): string {
  return name.replace(/^self\./, '');
}

/** The statement that ties this layer's weight to another's (either direction). */
export function tieEvidence(ir: ModelIR, layer: Layer): Evidence[] {
  const own = bare(layer.name);
  if (!own) return [];
  return ir.weightTies
    .filter((t) => bare(t.leftLayer) === own || bare(t.rightLayer) === own)
    .slice(0, 2)
    .map((t) => ({ span: t.span, message: `weight tie: ${t.text.replace(/\s+/g, ' ').slice(0, 80)}` }));
}

/**
 * `GPTConfig.n_embd default 768` in a dimension's note or a verdict's reason (`bias=config.bias (GPTConfig.bias default
 * False)`) -> the field's line in that class.
 */
export function configDefaultEvidence(ir: ModelIR, text: string, sources: ReadonlyArray<Dim | string | undefined>, spans: SpanMaker): Evidence[] {
  const out: Evidence[] = [];
  const seen = new Set<string>();
  for (const d of sources) {
    for (const m of (typeof d === 'string' ? d : d?.note ?? '').matchAll(/\b([A-Z]\w*)\.(\w+) default ([^;),]+)/g)) {
      const [, clsName, field, value] = m;
      const key = `${clsName}.${field}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const cls = ir.classes.find((c) => c.name === clsName);
      if (!cls) continue;
      const body = text.slice(cls.span.startOffset, cls.span.endOffset);
      const at = new RegExp(String.raw`^[ \t]+${field}\s*(?::[^=\n]*)?=`, 'm').exec(body);
      if (!at) continue;
      out.push({ span: spans.lineSpan(cls.span.startOffset + at.index + at[0].length - 1), message: `${key} defaults to ${value.trim().replace(/\.$/, '')} (callers may pass another value)` });
    }
  }
  return out.slice(0, 3);
}

/** Where the owner class's forward calls the layer (`self.lm_head(x)`), saying when that is what forward returns. */
export function forwardCallEvidence(ir: ModelIR, text: string, layer: Layer, spans: SpanMaker): Evidence[] {
  const attr = /^self\.(\w+)$/.exec(layer.name)?.[1];
  const cls = layer.ownerClass ? ir.classes.find((c) => c.name === layer.ownerClass) : undefined;
  if (!attr || !cls?.forwardSpan) return [];
  const body = text.slice(cls.forwardSpan.startOffset, cls.forwardSpan.endOffset);
  const m = new RegExp(String.raw`\bself\.${attr}\s*\(`).exec(body);
  if (!m) return [];
  const offset = cls.forwardSpan.startOffset + m.index;
  const line = spans.lineSpan(offset);
  const returns = /^return\b/.test(text.slice(line.startOffset, line.endOffset));
  return [{ span: line, message: returns ? `${cls.name}.forward returns its output` : `${cls.name}.forward calls it here` }];
}
