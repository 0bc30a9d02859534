/**
 * Shape-guarded conversions: a layer whose dims are unknown where it is built converts through the fallback
 * wrapper's factory (single, class-wide, convert-all), bringing the wrapper in the same edit; "convert all" on
 * fixtures in the styles of real model code converts >= 90 % of the large attention/MLP Linears, and the converted
 * files run forward + backward on CPU without Transformer Engine with the original's outputs.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MECHANICS_SETTINGS } from './fixes-support';
import { analyzeTree } from '../../server/src/analysis';
import type { ModelIR } from '../../server/src/analysis/ir';
import { applyEdits, fixesForFinding, sourceFixes, WRAPPER_MARKER, type Fix } from '../../server/src/fixes';
import { createPythonParser, type Parser } from '../../server/src/engine/parser';
import { runRules } from '../../server/src/rules';
import { tempDir } from '../temp-dirs';

const PYTHON = '/usr/bin/python3';
const hasTorch = spawnSync(PYTHON, ['-c', 'import torch'], { timeout: 60_000 }).status === 0;
const facet = (name: string): string => readFileSync(join(__dirname, '..', 'fixtures', 'facets', name), 'utf8');

let parser: Parser;
function irOf(text: string): ModelIR {
  const tree = parser.parse(text)!;
  try { return analyzeTree(tree, text); } finally { tree.delete(); }
}

/** Large attention / MLP Linears of a file (what an FP8 expert converts first). */
function bigLinears(ir: ModelIR) {
  return ir.layers.filter((l) => l.kind === 'linear' && (l.role === 'attention' || l.role === 'mlp'));
}

/** "Convert all in this file", then "Insert FP8 fallback wrapper" when still offered, re-analysing in between. */
function convertAll(text: string): { text: string; titles: string[] } {
  const titles: string[] = [];
  for (const id of ['convert-all:file', 'insert-wrapper']) {
    const fix = sourceFixes(text, irOf(text), MECHANICS_SETTINGS).find((f: Fix) => f.id === id);
    if (!fix) continue;
    titles.push(fix.title);
    text = applyEdits(text, fix.edits);
  }
  return { text, titles };
}

function run(file: string, cwd: string): string {
  const r = spawnSync(PYTHON, [file], { encoding: 'utf8', timeout: 150_000, cwd });
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  const m = /^RESULT (\S+) (\S+)$/m.exec(r.stdout);
  assert.ok(m, r.stdout);
  return r.stdout;
}

function results(out: string): number[] {
  const m = /^RESULT (\S+) (\S+)$/m.exec(out)!;
  return [Number(m[1]), Number(m[2])];
}

describe('fixes: shape-guarded conversions route through the factory', function () {
  this.timeout(240_000);
  before(async () => { parser = await createPythonParser(); });
  after(() => parser.delete());

  it('a single conversion of a guarded layer uses fp8_linear and brings the wrapper, never a bare TE import', () => {
    const text = facet('llama_config.py');
    const ir = irOf(text);
    const findings = runRules({ ir, text, settings: MECHANICS_SETTINGS, workspace: {} });
    const q = ir.layers.findIndex((l) => l.name === 'self.q_proj');
    const finding = findings.find((f) => f.code === 'PL101' && f.layerIndex === q);
    assert.ok(finding, 'PL101 on a guarded q_proj');
    const fix = fixesForFinding(text, ir, finding, MECHANICS_SETTINGS)[0];
    assert.match(fix.title, /^Convert to te\.Linear \(with fallback: fp8_linear\)$/);
    assert.equal(fix.safe, false);
    const out = applyEdits(text, fix.edits);
    assert.match(out, /self\.q_proj = fp8_linear\(config\.hidden_size, self\.num_heads \* self\.head_dim, bias=config\.attention_bias\)/);
    assert.ok(out.includes(WRAPPER_MARKER));
    assert.doesNotMatch(out, /^import transformer_engine/m);
    // With the wrapper in place the same conversion is a plain factory call.
    const again = irOf(out);
    const k = again.layers.findIndex((l) => l.name === 'self.k_proj');
    const f2 = runRules({ ir: again, text: out, settings: MECHANICS_SETTINGS, workspace: {} }).find((f) => f.code === 'PL101' && f.layerIndex === k)!;
    const fix2 = fixesForFinding(out, again, f2, MECHANICS_SETTINGS)[0];
    assert.ok(!applyEdits(out, fix2.edits).slice(out.indexOf(WRAPPER_MARKER) + 10).includes(WRAPPER_MARKER), 'one wrapper');
  });

  it('convert-all and class-wide conversions route every layer through the factories when one is guarded', () => {
    const text = facet('llama_config.py');
    const ir = irOf(text);
    const all = sourceFixes(text, ir, MECHANICS_SETTINGS, { className: 'LlamaAttention' });
    const cls = all.find((f) => f.id === 'convert-all:class:LlamaAttention')!;
    assert.match(cls.title, /^Convert 4 layers in class LlamaAttention to FP8 \(with fallback\)$/);
    const file = all.find((f) => f.id === 'convert-all:file')!;
    assert.match(file.title, /^Convert 10 layers in this file to FP8 \(with fallback/);
    assert.match(file.title, /skipped 2: embedding, lm-head/);
    const out = applyEdits(text, file.edits);
    assert.equal(out.match(/= fp8_linear\(/g)?.length, 7);
    // Two norms as such, the third fused with the MLP it feeds (built after it, so the norm's construction is wrapped).
    assert.equal(out.match(/= fp8_rmsnorm\(/g)?.length, 2);
    assert.match(out, /self\.post_attention_layernorm = fp8_fuse_mlp\(fp8_rmsnorm\(config\.hidden_size, eps=config\.rms_norm_eps\), self\.mlp, "gate_proj", "down_proj", up="up_proj", activation="swiglu", returns="norm"\)/);
    assert.match(out, /self\.lm_head = nn\.Linear\(/);
    assert.doesNotMatch(out, /te\.Linear\(config/);
  });

  for (const name of ['llama_config.py', 'vit_site.py', 'litgpt_presets.py', 'argparse_mlp.py', 'gpt_style.py', 'whisper_style.py', 'qwen_style.py', 'timm_factory_kwargs.py']) {
    it(`${name}: convert all converts >= 90 % of the large Linears; forward + backward on CPU equal the original's`, function () {
      const text = facet(name);
      const before = bigLinears(irOf(text)).length;
      const { text: out, titles } = convertAll(text);
      const after = bigLinears(irOf(out)).filter((l) => l.constructor === 'nn.Linear').length;
      assert.ok(before >= 2, `${before} large Linears`);
      assert.ok((before - after) / before >= 0.9, `converted ${before - after} of ${before}: ${titles.join('; ')}`);
      assert.ok(out.includes(WRAPPER_MARKER), titles.join('; '));
      if (!hasTorch) this.skip();
      const dir = tempDir('pl-guarded-');
      writeFileSync(join(dir, 'original.py'), text);
      writeFileSync(join(dir, 'converted.py'), out);
      const converted = run('converted.py', dir);
      assert.match(converted, /^Running in BF16 fallback: Transformer Engine not installed/m);
      const [a, b] = [results(run('original.py', dir)), results(converted)];
      for (let i = 0; i < 2; i++) assert.ok(Math.abs(a[i] - b[i]) <= 1e-5 * Math.max(1, Math.abs(a[i])), `${a} vs ${b}`);
    });
  }
});
