/**
 * PL6xx (post-training quantization) through the real path: parser, analysis (ir.ptq), rules. Fixtures in
 * test/fixtures/ptq; small inline files for each check's edges.
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { resolveSettings } from '../../common/settings';
import type { ModelIR } from '../../server/src/analysis/ir';
import { fnmatch } from '../../server/src/analysis/ptq';
import { explanationText, sentences } from '../../server/src/rules/explain';
import { analyzeText } from '../../server/src/engine/engine';
import { applyEdits, fixOutcome } from '../../server/src/fixes';
import { createPythonParser, type Parser } from '../../server/src/engine/parser';
import type { Finding } from '../../server/src/rules/types';

const FIX = join(__dirname, '..', 'fixtures', 'ptq');
const read = (name: string): string => readFileSync(join(FIX, name), 'utf8');

const HEAD = `import torch
import torch.nn as nn
import modelopt.torch.quantization as mtq


class LM(nn.Module):
    def __init__(self, vocab_size: int = 512, d: int = 64):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d)
        self.fc = nn.Linear(d, d)
        self.HEADNAME = nn.Linear(d, vocab_size, bias=False)


model = LM()
`;

describe('rules: PL6xx post-training quantization', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });
  const run = (text: string, targetGpu = 'any'): { ir: ModelIR; findings: Finding[] } => {
    const { tree, ir, findings } = analyzeText(parser, text, resolveSettings({ targetGpu }), {});
    tree?.delete();
    return { ir, findings: findings.filter((f) => f.code.startsWith('PL6')) };
  };
  const codes = (text: string, targetGpu = 'any'): string[] => run(text, targetGpu).findings.map((f) => `${f.code}:${f.span.startLine + 1}`);
  const model = (head: string, tail: string): string => HEAD.replace('HEADNAME', head) + tail;

  it('ModelOpt fixture: an lm-head the default wildcards miss, too few samples, E5M2 weights, a state_dict save', () => {
    const { ir, findings } = run(read('modelopt_fp8.py'));
    assert.deepEqual(findings.map((f) => f.code), ['PL601', 'PL603', 'PL604', 'PL606']);
    const call = ir.ptq.quantizeCalls[0];
    assert.equal(call.config?.base, 'FP8_DEFAULT_CFG');
    assert.equal(call.config?.weights, 'e5m2');
    assert.equal(call.config?.activations, 'e4m3');
    assert.deepEqual(call.forwardLoop && { fn: call.forwardLoop.fnName, runs: call.forwardLoop.runsModel, size: call.forwardLoop.size?.count, bs: call.forwardLoop.size?.batchSize },
      { fn: 'calibrate', runs: true, size: 4, bs: 8 });
    assert.match(findings[0].message, /self\.decoder \(the lm-head\).*"\*decoder\*"/);
    assert.match(findings[1].message, /32 samples/);
    assert.equal(ir.ptq.summaries.length, 1);
  });

  it('ModelOpt: the lm-head by its role, whatever its name; excluded by the defaults or by an added wildcard', () => {
    const loop = 'def loop(m):\n    for b in range(4):\n        m(torch.randint(0, 512, (128, 16)))\n\n\n';
    assert.deepEqual(codes(model('lm_head', `${loop}mtq.quantize(model, mtq.FP8_DEFAULT_CFG, loop)\n`)), []);
    assert.deepEqual(codes(model('output_layer', `${loop}mtq.quantize(model, mtq.FP8_DEFAULT_CFG, loop)\n`)), []);
    assert.deepEqual(codes(model('head', `${loop}mtq.quantize(model, mtq.FP8_DEFAULT_CFG, loop)\n`)), ['PL601:11']);
    const excluded = `${loop}cfg = copy.deepcopy(mtq.FP8_DEFAULT_CFG)\ncfg["quant_cfg"]["*head*"] = {"enable": False}\nmtq.quantize(model, cfg, loop)\n`;
    assert.deepEqual(codes(model('head', `import copy\n${excluded}`)), []);
    // A literal config merges no defaults: even a head called lm_head is quantized.
    const literal = `${loop}CFG = {"quant_cfg": {"*weight_quantizer": {"num_bits": (4, 3), "axis": None}, "*input_quantizer": {"num_bits": (4, 3), "axis": None}}, "algorithm": "max"}\nmtq.quantize(model, CFG, loop)\n`;
    assert.deepEqual(codes(model('lm_head', literal)), ['PL601:11']);
    // ...unless it splats the defaults in.
    const splat = literal.replace('"axis": None}}', '"axis": None}, **mtq.FP8_DEFAULT_CFG["quant_cfg"]}');
    assert.deepEqual(codes(model('lm_head', splat)), []);
  });

  it('ModelOpt 0.47 list-form quant_cfg: appended and literal entries, E5M2 under "cfg"', () => {
    const loop = 'def loop(m):\n    m(torch.randint(0, 512, (512, 16)))\n\n\n';
    const appended = `import copy\n${loop}cfg = copy.deepcopy(mtq.FP8_DEFAULT_CFG)\ncfg["quant_cfg"].append({"quantizer_name": "*head*", "enable": False})\nmtq.quantize(model, cfg, loop)\n`;
    assert.deepEqual(codes(model('head', appended)), []);
    const literal = `${loop}CFG = {"quant_cfg": [{"quantizer_name": "*", "enable": False}, {"quantizer_name": "*weight_quantizer", "cfg": {"num_bits": (5, 2), "axis": None}}, {"quantizer_name": "*input_quantizer", "cfg": {"num_bits": (4, 3), "axis": None}}], "algorithm": "max"}\nmtq.quantize(model, CFG, loop)\n`;
    assert.deepEqual(codes(model('lm_head', literal)).map((c) => c.split(':')[0]), ['PL601', 'PL604']);
    const { ir } = run(model('lm_head', literal));
    assert.deepEqual([ir.ptq.quantizeCalls[0].config?.weights, ir.ptq.quantizeCalls[0].config?.activations, ir.ptq.quantizeCalls[0].config?.scales], ['e5m2', 'e4m3', 'static']);
    const kv = `import copy\n${loop}cfg = copy.deepcopy(mtq.FP8_DEFAULT_CFG)\ncfg["quant_cfg"].extend(mtq.FP8_KV_CFG["quant_cfg"])\nmtq.quantize(model, cfg, loop)\n`;
    assert.equal(run(model('lm_head', kv)).ir.ptq.quantizeCalls[0].config?.kvCache, true);
  });

  it('PL602: static scales need a forward_loop that runs the model; dynamic and weight-only configs do not', () => {
    assert.deepEqual(codes(model('lm_head', 'model = mtq.quantize(model, mtq.FP8_DEFAULT_CFG)\n')), ['PL602:15']);
    assert.deepEqual(codes(model('lm_head', 'mtq.quantize(model, mtq.FP8_DEFAULT_CFG, forward_loop=None)\n')), ['PL602:15']);
    assert.deepEqual(codes(model('lm_head', 'mtq.quantize(model, mtq.FP8_DEFAULT_CFG, lambda m: None)\n')), ['PL602:15']);
    assert.deepEqual(codes(model('lm_head', 'def loop(m):\n    print("calibrating")\n\n\nmtq.quantize(model, mtq.FP8_DEFAULT_CFG, loop)\n')), ['PL602:15']);
    assert.deepEqual(codes(model('lm_head', 'mtq.quantize(model, mtq.FP8_PER_CHANNEL_PER_TOKEN_CFG)\n')), []);
    assert.deepEqual(codes(model('lm_head', 'mtq.quantize(model, mtq.FP8_2D_BLOCKWISE_WEIGHT_ONLY_CFG)\n')), []);
    // A loop handing the model to an evaluator runs it.
    assert.deepEqual(codes(model('lm_head', 'def loop(m):\n    evaluate(m, val_loader)\n\n\nmtq.quantize(model, mtq.FP8_DEFAULT_CFG, loop)\n')), []);
  });

  it('PL603: tens of samples are too few, tens of thousands too many; the sweet spot is quiet', () => {
    const loop = (n: string, bs = 1): string => `from itertools import islice\nfrom torch.utils.data import DataLoader\nN = ${n}\nloader = DataLoader(data, batch_size=${bs})\n\n\ndef loop(m):\n    for b in islice(loader, N):\n        m(b)\n\n\nmtq.quantize(model, mtq.FP8_DEFAULT_CFG, loop)\n`;
    assert.deepEqual(codes(model('lm_head', loop('16'))).map((c) => c.split(':')[0]), ['PL603']);
    assert.deepEqual(codes(model('lm_head', loop('64', 8))), []);
    assert.deepEqual(codes(model('lm_head', loop('20_000'))).map((c) => c.split(':')[0]), ['PL603']);
    assert.match(run(model('lm_head', loop('20_000'))).findings[0].message, /20000 samples costs time/);
    assert.deepEqual(codes(model('lm_head', loop('512'))), []);
  });

  it('PL604 and PL605: E5M2 in inference, and formats the target GPU lacks', () => {
    const e5 = 'cfg = copy.deepcopy(mtq.FP8_DEFAULT_CFG)\ncfg["quant_cfg"]["*input_quantizer"]["num_bits"] = (5, 2)\nmtq.quantize(model, cfg, lambda m: m(x))\n';
    assert.deepEqual(codes(model('lm_head', `import copy\n${e5}`)), ['PL604:17']);
    const mx = 'mtq.quantize(model, mtq.MXFP8_DEFAULT_CFG)\n';
    assert.deepEqual(codes(model('lm_head', mx), 'hopper'), ['PL605:15']);
    assert.deepEqual(codes(model('lm_head', mx), 'blackwell'), []);
    const fp8 = 'mtq.quantize(model, mtq.FP8_DEFAULT_CFG, lambda m: m(x))\n';
    assert.deepEqual(codes(model('lm_head', fp8), 'ampere'), ['PL605:15']);
    assert.deepEqual(codes(model('lm_head', fp8), 'ada'), []);
    assert.deepEqual(codes(model('lm_head', 'mtq.quantize(model, mtq.INT8_DEFAULT_CFG, lambda m: m(x))\n'), 'ampere'), []);
    // Chosen at run time by the GPU's compute capability: quiet in the guarded branch, not in its else.
    const guarded = (body: string): string => `if torch.cuda.get_device_capability() >= (8, 9):\n    ${body}else:\n    pass\n`;
    assert.deepEqual(codes(model('lm_head', guarded(fp8)), 'ampere'), []);
    const inElse = `if torch.cuda.get_device_capability() >= (8, 9):\n    pass\nelse:\n    ${fp8}`;
    assert.deepEqual(codes(model('lm_head', inElse), 'ampere').map((c) => c.split(':')[0]), ['PL605']);
  });

  it('PL606: a state_dict save loses the quantizer state unless ModelOpt saves or exports it too', () => {
    const q = 'mtq.quantize(model, mtq.FP8_DEFAULT_CFG, lambda m: m(x))\n';
    assert.deepEqual(codes(model('lm_head', `${q}torch.save(model.state_dict(), "q.pt")\n`)), ['PL606:16']);
    assert.deepEqual(codes(model('lm_head', `import modelopt.torch.opt as mto\n${q}mto.save(model, "q.pth")\ntorch.save(model.state_dict(), "q.pt")\n`)), []);
    assert.deepEqual(codes(model('lm_head', `from modelopt.torch.export import export_tensorrt_llm_checkpoint\n${q}export_tensorrt_llm_checkpoint(model, "gpt", torch.bfloat16, "out")\ntorch.save(model.state_dict(), "q.pt")\n`)), []);
    // Without ModelOpt in the file, a state_dict save is plain PyTorch.
    assert.deepEqual(codes('import torch\ntorch.save(model.state_dict(), "m.pt")\n'), []);
  });

  it('torchao: every nn.Linear without filter_fn, a tied head takes the embedding with it, E5M2 activations', () => {
    const { findings, ir } = run(read('torchao_fp8.py'));
    assert.deepEqual(findings.map((f) => f.code).sort(), ['PL601', 'PL601', 'PL604']);
    assert.equal(ir.ptq.quantizeCalls[0].config?.scales, 'dynamic');
    assert.equal(ir.fp8Conversions.length, 0, 'inference quantize_ is not a training conversion (no PL201 twice)');
    const filtered = read('torchao_fp8.py').replace('activation_dtype=torch.float8_e5m2)', 'activation_dtype=torch.float8_e4m3fn), filter_fn=lambda m, fqn: isinstance(m, nn.Linear) and fqn != "lm_head"');
    assert.deepEqual(run(filtered).findings.map((f) => f.code), []);
    const noHeadHere = 'import torch\nfrom torchao.quantization import quantize_, Float8WeightOnlyConfig\nfrom model import GPT\nmodel = GPT()\nquantize_(model, Float8WeightOnlyConfig())\n';
    assert.deepEqual(codes(noHeadHere), ['PL601:5']);
  });

  it('KV-cache configs merged with update() are read; unknown configs are opaque, not guessed', () => {
    const kv = 'import copy\ncfg = copy.deepcopy(mtq.FP8_DEFAULT_CFG)\ncfg["quant_cfg"].update(mtq.FP8_KV_CFG["quant_cfg"])\nmtq.quantize(model, cfg, lambda m: m(x))\n';
    const { ir } = run(model('lm_head', kv));
    assert.equal(ir.ptq.quantizeCalls[0].config?.kvCache, true);
    const opaque = run(model('head', 'mtq.quantize(model, load_config("cfg.yaml"), lambda m: m(x))\n'));
    assert.match(opaque.ir.ptq.quantizeCalls[0].config?.opaque ?? '', /load_config/);
    assert.deepEqual(opaque.findings, []);
  });

  it('every PL6xx message is one sentence of at most ~120 characters, explained in the hover', () => {
    const all = [...run(read('modelopt_fp8.py'), 'ampere').findings, ...run(read('torchao_fp8.py'), 'ampere').findings];
    assert.ok(all.length >= 8);
    for (const f of all) {
      assert.ok(f.message.length <= 125, `${f.code} (${f.message.length}): ${f.message}`);
      assert.equal(sentences(f.message).length, 1, f.message);
      assert.ok(f.explanation && explanationText(f).length > 0, `${f.code}: explanation`);
    }
  });

  it('each fix leaves no finding of its code (PL605: the quantize call guarded by the GPU\'s compute capability)', () => {
    const fixed = readFileSync(join(FIX, '..', 'fixes', 'expected', 'ptq_torchao.filter.py'), 'utf8');
    assert.deepEqual(run(fixed).findings.map((f) => f.code), []);
    const text = read('modelopt_fp8.py');
    const { ir, findings } = run(text, 'ampere');
    const settings = resolveSettings({ targetGpu: 'ampere' });
    assert.deepEqual([...new Set(findings.map((f) => f.code))].sort(), ['PL601', 'PL603', 'PL604', 'PL605', 'PL606']);
    for (const f of findings) {
      const out = fixOutcome(text, ir, f, settings);
      assert.equal(out.fixes.length, 1, `${f.code}: ${out.refusals.join(' ')}`);
      const after = run(applyEdits(text, out.fixes[0].edits), 'ampere').findings;
      assert.equal(after.filter((g) => g.code === f.code).length, 0, `${f.code} fixed: ${after.map((g) => g.message).join(' | ')}`);
    }
    // The file writes the dict form of quant_cfg (ModelOpt < 0.47): the head's wildcard is added the same way.
    const head = fixOutcome(text, ir, findings.find((f) => f.code === 'PL601')!, settings).fixes[0];
    assert.match(applyEdits(text, head.edits), /^cfg\["quant_cfg"\]\["\*decoder\*"\] = \{"enable": False\}$/m);
  });

  it('fnmatch follows Python: *, ? and [kv] classes', () => {
    assert.ok(fnmatch('lm_head.weight_quantizer', '*lm_head*'));
    assert.ok(fnmatch('layers.0.attn.k_bmm_quantizer', '*[kv]_bmm_quantizer'));
    assert.ok(!fnmatch('layers.0.attn.q_bmm_quantizer', '*[kv]_bmm_quantizer'));
    assert.ok(fnmatch('output.weight_quantizer', 'output.*'));
    assert.ok(!fnmatch('decoder.output.weight_quantizer', 'output.*'));
  });
});
