/**
 * Runs the analysis over real model files when a local corpus exists (corpus/ in the repository, or
 * ../shared/corpus): never committed, absent in CI, so the suite skips cleanly without it. The checks are the
 * product's promises, stated generally (no file names, no line numbers).
 */
import { strict as assert } from 'node:assert';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { analyze, initParser } from './analysis-helpers';
import type { Layer, ModelIR } from '../../server/src/analysis/ir';

const dirs = [join(__dirname, '..', '..', 'corpus'), join(__dirname, '..', '..', '..', 'shared', 'corpus')];
const files = dirs.filter((d) => existsSync(d)).flatMap((d) => readdirSync(d).filter((f) => f.endsWith('.py')).map((f) => join(d, f)));

const HEAD_NAME = /^(lm_head|output|decoder|proj_out|output_projection|output_layer|embed_out|head)$/;

function isHeadLike(l: Layer, ir: ModelIR): boolean {
  if (l.kind !== 'linear' && l.kind !== 'parallel-linear') return false;
  const out = (l.outFeatures?.text ?? '').replace(/\s+/g, '');
  const vocab = /vocab|ntoken|n_vocab|num_tokens/i.test(out);
  const tied = ir.weightTies.some((t) => t.leftLayer === l.path || t.rightLayer === l.path);
  return vocab || tied || (HEAD_NAME.test(l.attr ?? '') && vocab);
}

(files.length ? describe : describe.skip)('analysis: real model corpus', () => {
  before(initParser);
  for (const file of files) {
    describe(file.split('/').pop() as string, () => {
      let ir: ModelIR;
      before(() => { ir = analyze(readFileSync(file, 'utf8')); });

      it('recognises every lm-head and embedding by role, and suggests no conversion for them', () => {
        for (const l of ir.layers) {
          if (isHeadLike(l, ir)) assert.equal(l.role, 'lm_head', `${l.name} should be the lm-head`);
          if (l.kind === 'embedding') assert.equal(l.role, 'embedding', `${l.name} should be an embedding`);
          if (l.role === 'lm_head' || l.role === 'embedding' || l.tied) assert.equal(l.convertible, false, `${l.name} must stay BF16`);
        }
      });

      it('never suggests converting te.* layers, tiny classifiers/routers or shape-failing layers', () => {
        for (const l of ir.layers) {
          if (l.isTe || l.role === 'classifier' || l.role === 'router' || l.shapeOk === false) {
            assert.equal(l.convertible, false, `${l.name} (${l.constructor})`);
          }
          if (l.convertible === true) assert.ok(l.teEquivalent, `${l.name} convertible needs a te equivalent`);
          assert.ok(l.reasons.length > 0, `${l.name} needs reasons`);
        }
      });

      it('recognises custom norm classes and local Linear subclasses', () => {
        for (const c of ir.classes) {
          const base = c.resolvedBases.join(' ');
          if (/torch\.nn\.Linear\b/.test(base)) assert.equal(c.layerKind, 'linear', c.name);
          if (/torch\.nn\.LayerNorm\b/.test(base)) assert.equal(c.layerKind, 'layernorm', c.name);
          if (/RMSNorm$/.test(c.name)) assert.equal(c.layerKind, 'rmsnorm', c.name);
        }
        for (const l of ir.layers) {
          if (l.localClass && /Norm/.test(l.localClass)) assert.equal(l.role, 'norm', l.name);
        }
      });

      it('flags backward inside TE autocast and not after it', () => {
        const inside = new Set(ir.autocastRegions.flatMap((r) => r.backwardInside.map((b) => b.span.startOffset)));
        for (const c of ir.calls.filter((k) => k.kind === 'backward')) {
          const within = ir.autocastRegions.some((r) => c.span.startOffset >= r.bodySpan.startOffset && c.span.endOffset <= r.bodySpan.endOffset);
          assert.equal(inside.has(c.span.startOffset), within, c.text);
        }
      });
    });
  }
});
