/**
 * PL104 (norm -> Linear: te.LayerNormLinear) and PL105 (norm -> fc1 -> activation -> fc2: te.LayerNormMLP).
 * TE's fused modules normalise and cast to FP8 in one kernel, so the BF16 activation between the norm and the GEMM is
 * never written out; unfused FP8 loses much of its gain to separate amax/scale/cast kernels (FP8-FACTS, "Measured").
 *
 * The data flow is read from the text of `forward` within one class: a call `self.norm(...)` whose value is the sole
 * argument of the next call, either directly (`self.fc(self.norm(x))`) or through a variable used once
 * (`h = self.norm(x)` then `self.fc(h)`). Flows across modules (a norm in Block feeding attention's projection) are
 * not followed: fusing them would move a layer between classes.
 */
import { closeParen } from '../analysis/calls';
import type { ClassInfo, Layer, ModelIR } from '../analysis/ir';
import { forwardCallEvidence, SpanMaker } from './evidence';
import { dimText, layerLabel } from './format';
import type { Finding, RuleContext, RuleModule } from './types';

interface CallAt {
  callee: string;
  start: number;
  end: number;
}

const ACTIVATIONS: Record<string, string> = { gelu: 'gelu', relu: 'relu', silu: 'silu', quick_gelu: 'qgelu' };

/** `F.gelu` / `torch.nn.functional.relu` / `torch.relu` -> TE activation name. */
function functionalActivation(callee: string): string | undefined {
  const m = /(?:^|\.)(\w+)$/.exec(callee);
  return m && /^(?:F|torch|torch\.nn\.functional|nn\.functional)\./.test(callee) ? ACTIVATIONS[m[1]] : undefined;
}

function isIdentChar(code: number): boolean {
  return (code >= 48 && code <= 57) || (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || code === 95 || code === 46;
}

/** The call whose sole argument is the expression [start, end) of `body`, if any. */
function enclosingSoleCall(body: string, start: number, end: number): CallAt | undefined {
  let i = start - 1;
  while (i >= 0 && /[ \t\n]/.test(body[i])) i--;
  if (body[i] !== '(') return undefined;
  const open = i;
  let j = open - 1;
  while (j >= 0 && isIdentChar(body.charCodeAt(j))) j--;
  const callee = body.slice(j + 1, open);
  if (!/^[A-Za-z_][\w.]*$/.test(callee)) return undefined;
  let k = end;
  while (k < body.length && /[ \t\n]/.test(body[k])) k++;
  if (body[k] !== ')') return undefined;
  return { callee, start: j + 1, end: k + 1 };
}

/**
 * Where the value of the expression [start, end) goes when it has exactly one consumer call: directly, or through an
 * assignment `v = EXPR` whose variable is used once (as the sole argument of a call) before being reassigned.
 */
function soleConsumer(body: string, start: number, end: number): CallAt | undefined {
  const direct = enclosingSoleCall(body, start, end);
  if (direct) return direct;
  const lineStart = body.lastIndexOf('\n', start - 1) + 1;
  const assign = /^[ \t]*([A-Za-z_]\w*)[ \t]*=[ \t]*$/.exec(body.slice(lineStart, start));
  const lineEnd = body.indexOf('\n', end);
  if (!assign || body.slice(end, lineEnd < 0 ? body.length : lineEnd).trim() !== '') return undefined;
  const name = assign[1];
  const useRe = new RegExp(`(?<![\\w.])${name}\\b(?!\\s*=[^=])`, 'g');
  const defRe = new RegExp(`^[ \\t]*${name}[ \\t]*=(?!=)`);
  let consumer: CallAt | undefined;
  // Line by line after the definition: every read of the variable until it is reassigned (a reassignment's own
  // right-hand side still reads the old value, as in `h = self.fc1(h)`).
  for (let ls = lineEnd < 0 ? body.length : lineEnd + 1; ls < body.length;) {
    const le = body.indexOf('\n', ls);
    const stop = le < 0 ? body.length : le;
    const line = body.slice(ls, stop);
    const def = defRe.exec(line);
    useRe.lastIndex = 0;
    for (let m = useRe.exec(line); m; m = useRe.exec(line)) {
      if (def && m.index < def[0].length) continue;
      if (consumer) return undefined;
      consumer = enclosingSoleCall(body, ls + m.index, ls + m.index + name.length);
      if (!consumer) return undefined;
    }
    if (def) break;
    ls = stop + 1;
  }
  return consumer;
}

/** Every `self.<attr>(` call in `body`. */
function callsOf(body: string, attr: string): CallAt[] {
  const out: CallAt[] = [];
  const re = new RegExp(`\\bself\\.${attr}\\s*\\(`, 'g');
  for (let m = re.exec(body); m; m = re.exec(body)) {
    const open = m.index + m[0].length - 1;
    out.push({ callee: `self.${attr}`, start: m.index, end: closeParen(body, open) });
  }
  return out;
}

function checkClass(ir: ModelIR, cls: ClassInfo, text: string, layers: Array<[Layer, number]>, spans: SpanMaker): Finding[] {
  if (!cls.forwardSpan) return [];
  const body = text.slice(cls.forwardSpan.startOffset, cls.forwardSpan.endOffset);
  const byAttr = new Map<string, [Layer, number]>();
  for (const entry of layers) {
    const m = /^self\.(\w+)$/.exec(entry[0].name);
    if (m) byAttr.set(m[1], entry);
  }
  const linearOf = (call: CallAt | undefined): [Layer, number] | undefined => {
    const m = call && /^self\.(\w+)$/.exec(call.callee);
    const entry = m ? byAttr.get(m[1]) : undefined;
    return entry && entry[0].kind === 'linear' && entry[0].convertible === true && !entry[0].isTe && callsOf(body, m![1]).length === 1 ? entry : undefined;
  };
  const findings: Finding[] = [];
  for (const [attr, [norm, layerIndex]] of byAttr) {
    if ((norm.kind !== 'layernorm' && norm.kind !== 'rmsnorm') || norm.convertible !== true || norm.isTe) continue;
    const uses = callsOf(body, attr);
    if (uses.length !== 1) continue;
    const fc1Call = soleConsumer(body, uses[0].start, uses[0].end);
    const fc1 = linearOf(fc1Call);
    if (!fc1 || !fc1Call) continue;
    const normalization = norm.kind === 'rmsnorm' ? 'RMSNorm' : 'LayerNorm';
    const actCall = soleConsumer(body, fc1Call.start, closeParen(body, body.indexOf('(', fc1Call.start)));
    const actAttr = actCall && /^self\.(\w+)$/.exec(actCall.callee)?.[1];
    const activation = actCall && (functionalActivation(actCall.callee)
      ?? (actAttr && !byAttr.has(actAttr) ? ACTIVATIONS[actAttr.replace(/^act(?:ivation)?_?/, '') || ''] : undefined)
      ?? (actAttr && byAttr.get(actAttr) ? ACTIVATIONS[byAttr.get(actAttr)![0].constructor.replace(/^.*\./, '').toLowerCase()] : undefined));
    const fc2 = activation && actCall ? linearOf(soleConsumer(body, actCall.start, actCall.end)) : undefined;
    const where = `${cls.name}.forward`;
    const related = [...forwardCallEvidence(ir, text, norm, spans), { span: fc1[0].span, message: `${layerLabel(fc1[0])} is built here` }];
    const keys = 'There is no automatic fix: fusing changes the module structure, and the parameter names change';
    if (fc2 && activation) {
      // TE's "gelu" kernel is the tanh approximation; nn.GELU() and F.gelu default to the exact (erf) form.
      const actLayer = actAttr ? byAttr.get(actAttr)?.[0] : undefined;
      const tanh = /tanh/.test(actLayer?.options.approximate ?? '');
      const geluNote = activation === 'gelu' && !tanh
        ? `TE's activation="gelu" is the tanh approximation of GELU, while ${actLayer ? `${actLayer.constructor}()` : actCall?.callee ?? 'this GELU'} is the exact (erf) form: outputs differ slightly (about 1e-3), harmless when training from scratch; re-check the accuracy of an already trained model.`
        : undefined;
      findings.push({
        code: 'PL105', span: norm.span, severity: 'hint', layerIndex,
        message: `${layerLabel(norm)} -> ${layerLabel(fc1[0])} -> ${activation} -> ${layerLabel(fc2[0])} is one MLP block; fuse it as te.LayerNormMLP by hand`,
        related: [...related, { span: fc2[0].span, message: `${layerLabel(fc2[0])} is built here` }],
        explanation: {
          facts: [
            `In ${where} the norm's output goes only to ${layerLabel(fc1[0])}, then through ${activation} to ${layerLabel(fc2[0])}.`,
            `te.LayerNormMLP(hidden_size=${dimText(norm.normalizedShape ?? norm.inFeatures)}, ffn_hidden_size=${dimText(fc1[0].outFeatures)}, normalization="${normalization}", activation="${activation}") computes the same block.`,
            ...(geluNote ? [geluNote] : []),
          ],
          consequence: 'The fused module runs the norm, the FP8 casts and the activation in one pass, so no BF16 activation is written out between them; unfused FP8 loses much of its gain to separate cast kernels.',
          fix: `${keys} (layer_norm_weight, fc1_weight, fc2_weight): map checkpoint keys when loading.`,
        },
      });
    } else {
      findings.push({
        code: 'PL104', span: norm.span, severity: 'hint', layerIndex,
        message: `${layerLabel(norm)} feeds only ${layerLabel(fc1[0])}; fuse both as te.LayerNormLinear(${dimText(fc1[0].inFeatures)}, ${dimText(fc1[0].outFeatures)}) by hand`,
        related,
        explanation: {
          facts: [
            `In ${where} the norm's output goes only to ${layerLabel(fc1[0])}.`,
            `te.LayerNormLinear(${dimText(fc1[0].inFeatures)}, ${dimText(fc1[0].outFeatures)}, normalization="${normalization}") computes both.`,
          ],
          consequence: 'It normalises and casts to FP8 in one kernel before the GEMM, instead of writing the BF16 activation out and reading it back.',
          fix: `${keys} (layer_norm_weight): map checkpoint keys when loading.`,
        },
      });
    }
  }
  return findings;
}

export const fusionRules: RuleModule = {
  codes: ['PL104', 'PL105'],
  check({ ir, text }: RuleContext): Finding[] {
    const byClass = new Map<string, Array<[Layer, number]>>();
    ir.layers.forEach((layer, i) => {
      if (!layer.ownerClass) return;
      const list = byClass.get(layer.ownerClass) ?? [];
      list.push([layer, i]);
      byClass.set(layer.ownerClass, list);
    });
    const findings: Finding[] = [];
    const spans = new SpanMaker(text);
    for (const cls of ir.classes) {
      const layers = byClass.get(cls.name);
      if (layers && layers.length >= 2) findings.push(...checkClass(ir, cls, text, layers, spans));
    }
    return findings;
  },
};
