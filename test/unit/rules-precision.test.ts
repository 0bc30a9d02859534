/** PL201 on whole-model FP8 conversions: the advice fits the library that converts. */
import * as assert from 'node:assert/strict';
import { DEFAULT_SETTINGS, resolveSettings } from '../../common/settings';
import { fixOutcome } from '../../server/src/fixes';
import { explanationText } from '../../server/src/rules/explain';
import type { Finding } from '../../server/src/rules/types';

/** What the user reads of a finding: the message and the hover's explanation. */
const fullText = (f: Finding): string => `${f.message} ${explanationText(f)}`;
import { analyzeText, stackFor, workspaceFactsOf } from '../../server/src/engine/engine';
import { createPythonParser, type Parser } from '../../server/src/engine/parser';

const MODEL = `import torch
import torch.nn as nn

class LM(nn.Module):
    def __init__(self, vocab_size: int = 50304, d: int = 768):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d)
        self.fc = nn.Linear(d, 4 * d)
        self.lm_head = nn.Linear(d, vocab_size, bias=False)

model = LM()
`;

describe('rules: PL201 on whole-model conversions', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });
  const pl201 = (text: string): string[] => {
    const { tree, findings } = analyzeText(parser, text, resolveSettings({}), { anyAutocastRegion: true });
    tree?.delete();
    return findings.filter((f) => f.code === 'PL201').map(fullText);
  };

  it('torchao: pass a module_filter_fn', () => {
    const msgs = pl201(`${MODEL}from torchao.float8 import convert_to_float8_training\nconvert_to_float8_training(model)\n`);
    assert.equal(msgs.length, 1);
    assert.match(msgs[0], /would run the lm-head self\.lm_head in FP8/);
    assert.match(msgs[0], /module_filter_fn that skips it \(torchao\)/);
  });

  it('a filter bound to a variable is read through it: partial(fn, ...) and lambdas', () => {
    const imp = `${MODEL}from functools import partial\nfrom torchao.float8 import convert_to_float8_training\n`;
    const skip = 'def skip_ends(mod, fqn, first_layer_name=None, last_layer_name=None):\n    return fqn not in (first_layer_name, last_layer_name)\n';
    assert.equal(pl201(`${imp}${skip}func = partial(skip_ends, last_layer_name="lm_head")\nconvert_to_float8_training(model, module_filter_fn=func)\n`).length, 0);
    assert.equal(pl201(`${imp}fn = lambda mod, fqn: fqn != "lm_head"\nconvert_to_float8_training(model, module_filter_fn=fn)\n`).length, 0);
    const keep = 'def keep_big(mod, fqn, min_features=0):\n    return mod.in_features >= min_features\n';
    const msgs = pl201(`${imp}${keep}f2 = partial(keep_big, min_features=1024)\nconvert_to_float8_training(model, module_filter_fn=f2)\n`);
    assert.equal(msgs.length, 1);
    assert.match(msgs[0], /its filter \(f2\) does not visibly exclude the lm-head/);
  });

  it("Transformer Engine's convert_model has no filter: restore the head or disable autocast around it", () => {
    const msgs = pl201(`${MODEL}from accelerate.utils import convert_model\nconvert_model(model)\n`);
    assert.equal(msgs.length, 1);
    assert.match(msgs[0], /no filter for single modules: restore the head to torch\.nn\.Linear after converting/);
    assert.doesNotMatch(msgs[0], /filter_fqns/);
  });
});

describe('rules: PL401 for FP8 through torchao', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });
  const pl401 = (text: string) => {
    const { tree, findings } = analyzeText(parser, text, resolveSettings({}), {});
    tree?.delete();
    return findings.filter((f) => f.code === 'PL401');
  };
  const MODEL2 = 'import torch\nimport torch.nn as nn\nfrom torchao.float8 import convert_to_float8_training\n\nm = nn.Sequential(nn.Linear(2048, 4096), nn.Linear(4096, 2048))\n';

  it('warns when the conversion runs with no capability check, not when it is guarded', () => {
    const bare = pl401(`${MODEL2}convert_to_float8_training(m)\n`);
    assert.equal(bare.length, 1);
    assert.match(fullText(bare[0]), /below compute capability 8\.9 \(A100, V100, RTX 3090\) the first FP8 GEMM \(torch\._scaled_mm\) raises/);
    const guarded = pl401(`${MODEL2}if torch.cuda.get_device_capability() >= (8, 9):\n    convert_to_float8_training(m)\n`);
    assert.equal(guarded.length, 0);
  });

  it('an imported helper named for the check counts too (torchtitan has_cuda_capability, is_sm_at_least_89)', () => {
    for (const check of ['has_cuda_capability(8, 9)', 'is_sm_at_least_89()', 'is_hopper()']) {
      const name = check.slice(0, check.indexOf('('));
      const text = `${MODEL2}from mylib.utils import ${name}\nenabled = ${check}\nif enabled:\n    convert_to_float8_training(m)\n`;
      assert.equal(pl401(text).length, 0, check);
    }
    // A helper named for something else is no check.
    assert.equal(pl401(`${MODEL2}from mylib.utils import ready\nif ready():\n    convert_to_float8_training(m)\n`).length, 1);
  });

  it('offers no Transformer Engine wrapper as its fix, and says what to do', () => {
    const text = `${MODEL2}convert_to_float8_training(m)\n`;
    const { tree, ir, findings } = analyzeText(parser, text, resolveSettings({}), {});
    tree?.delete();
    const out = fixOutcome(text, ir, findings.find((f) => f.code === 'PL401')!, DEFAULT_SETTINGS);
    assert.equal(out.fixes.length, 0);
    assert.match(out.refusals[0], /guard the conversion yourself/);
  });
});

describe('rules: PL502 casts of the model only', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });
  const pl502 = (text: string) => {
    const { tree, findings } = analyzeText(parser, text, resolveSettings({}), {});
    tree?.delete();
    return findings.filter((f) => f.code === 'PL502');
  };

  it('not a tensor cast, not before an optimizer that keeps FP32 master weights', () => {
    const head = 'import torch\nimport transformer_engine.pytorch as te\nmodel = te.Linear(1024, 1024)\n';
    assert.equal(pl502(`${head}x = torch.randn(4, 1024).to(torch.bfloat16)\nopt = torch.optim.AdamW(model.parameters())\n`).length, 0);
    assert.equal(pl502(`${head}model = model.to(torch.bfloat16)\nopt = te.optimizers.FusedAdam(model.parameters(), master_weights=True)\n`).length, 0);
    assert.equal(pl502(`${head}model = model.to(torch.bfloat16)\nopt = torch.optim.AdamW(model.parameters())\n`).length, 1);
    // after the optimizer too: the cast swaps the parameters' data in place
    const after = pl502(`${head}opt = torch.optim.AdamW(model.parameters())\nmodel.bfloat16()\n`);
    assert.equal(after.length, 1);
    assert.match(fullText(after[0]), /after the optimizer/);
  });

  it('a cast after device moves, a 16-bit from_pretrained, and the FP16 step in the message', () => {
    const chain = pl502('import torch\ndef a(model):\n    model = model.cuda().half()\n    return torch.optim.AdamW(model.parameters(), lr=1e-5)\n');
    assert.equal(chain.length, 1);
    assert.match(fullText(chain[0]), /FP16 step \(about 0\.05 % of a weight\)/);
    const hf = pl502('import torch\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\ndef b():\n    tok = AutoTokenizer.from_pretrained("x", torch_dtype=torch.bfloat16)\n    model = AutoModelForCausalLM.from_pretrained("x", torch_dtype=torch.bfloat16)\n    return torch.optim.AdamW(model.parameters(), lr=1e-5)\n');
    assert.equal(hf.length, 1);
    assert.match(fullText(hf[0]), /AutoModelForCausalLM\.from_pretrained\(\.\.\., torch_dtype=torch\.bfloat16\) loads the model's weights in 16-bit before the optimizer/);
    assert.match(fullText(hf[0]), /BF16 step \(about 0\.4 %/);
    assert.equal(pl502('import torch\ndef c(model):\n    x = torch.randn(3).cuda().half()\n    return torch.optim.AdamW(model.parameters())\n').length, 0);
    // Built and cast in one expression; from_config with a dtype.
    assert.equal(pl502('import torch\ndef a(model_cls, cfg):\n    model = model_cls(cfg).to(dtype=torch.bfloat16)\n    return torch.optim.AdamW(model.parameters())\n').length, 1);
    assert.equal(pl502('import torch\ndef b(cfg):\n    model = build_model(cfg).bfloat16()\n    return torch.optim.AdamW(model.parameters())\n').length, 1);
    assert.equal(pl502('import torch\nfrom transformers import AutoModelForCausalLM\ndef c(cfg):\n    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)\n    return torch.optim.AdamW(model.parameters())\n').length, 1);
  });

  it('not when only adapters train on the frozen 16-bit weights (PEFT / LoRA)', () => {
    const text = 'import torch\nfrom peft import LoraConfig, get_peft_model\nfrom transformers import AutoModelForCausalLM\ndef setup(name):\n    model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)\n    model = get_peft_model(model, LoraConfig(r=8))\n    return torch.optim.AdamW(model.parameters(), lr=1e-4)\n';
    assert.equal(pl502(text).length, 0);
  });
});

describe('rules: PL201 for accelerate with the precision from a variable', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });

  it('a precision or handler list in a variable is read from its last assignment before the call', () => {
    const run = (body: string) => {
      const { tree, findings } = analyzeText(parser, `${MODEL}from accelerate import Accelerator\nfrom accelerate.utils import FP8RecipeKwargs\n${body}`, resolveSettings({}), { anyAutocastRegion: true });
      tree?.delete();
      return findings.filter((f) => f.code === 'PL201').length;
    };
    assert.equal(run('mp = "bf16"\nmp = "fp8"\nacc = Accelerator(mixed_precision=mp)\n'), 1);
    assert.equal(run('mp = "fp8"\nmp = "bf16"\nacc = Accelerator(mixed_precision=mp)\n'), 0);
    assert.equal(run('def main(m):\n    p = "fp8"\n    return Accelerator(mixed_precision=p).prepare(m)\n'), 1);
    assert.equal(run('h = [FP8RecipeKwargs(backend="te")]\nacc = Accelerator(mixed_precision=args.mp, kwargs_handlers=h)\n'), 1);
    assert.equal(run('h = (\n    [FP8RecipeKwargs(backend="te")] if mp == "fp8" else None\n)\nacc = Accelerator(mixed_precision=mp, kwargs_handlers=h)\n'), 1);
  });

  it('an FP8 recipe handler says FP8 is meant even when mixed_precision is not a literal', () => {
    const text = `${MODEL}from accelerate import Accelerator\nfrom accelerate.utils import FP8RecipeKwargs\naccelerator = Accelerator(mixed_precision=hp.mixed_precision, kwargs_handlers=[FP8RecipeKwargs(backend="te")])\nmodel = accelerator.prepare(model)\n`;
    const { tree, findings } = analyzeText(parser, text, resolveSettings({}), { anyAutocastRegion: true });
    tree?.delete();
    const pl201 = findings.filter((f) => f.code === 'PL201');
    assert.equal(pl201.length, 1);
    assert.match(fullText(pl201[0]), /accelerate's Transformer Engine backend/);
    const bf16 = `${MODEL}from accelerate import Accelerator\naccelerator = Accelerator(mixed_precision=hp.mixed_precision)\n`;
    const t2 = analyzeText(parser, bf16, resolveSettings({}), { anyAutocastRegion: true });
    t2.tree?.delete();
    assert.equal(t2.findings.filter((f) => f.code === 'PL201').length, 0);
  });
});

describe('rules: PL304 with positional recipe arguments', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });

  it('DelayedScaling(0, Format.E5M2) is the same invalid recipe as fp8_format=Format.E5M2', () => {
    const text = 'import transformer_engine.pytorch as te\nfrom transformer_engine.common.recipe import DelayedScaling, Format\nr = DelayedScaling(0, Format.E5M2)\n';
    const { tree, findings } = analyzeText(parser, text, resolveSettings({}), {});
    tree?.delete();
    assert.equal(findings.filter((f) => f.code === 'PL304').length, 1);
  });
});

describe('rules: PL303 through an import alias', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });

  it('from transformer_engine.pytorch import fp8_autocast as fa; with fa(...) is deprecated too', () => {
    const text = 'import torch\nimport transformer_engine.pytorch as te\nfrom transformer_engine.pytorch import fp8_autocast as fa\nm = te.Linear(768, 768)\nwith fa(enabled=True):\n    y = m(torch.randn(4, 768))\n';
    const { tree, findings } = analyzeText(parser, text, resolveSettings({}), {});
    tree?.delete();
    const pl303 = findings.filter((f) => f.code === 'PL303' && f.span.startLine === 4);
    assert.equal(pl303.length, 1, findings.map((f) => `${f.code}@${f.span.startLine}`).join());
    // Imported by name: the advice names the import, not a `te.` the file may not have.
    assert.match(fullText(pl303[0]), /Import autocast from transformer_engine\.pytorch/);
  });
});

describe('rules: one FP8 or quantization stack across the analysed files', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });
  const MLP = 'import torch.nn as nn\nclass MLP(nn.Module):\n    def __init__(self, dim: int = 1024):\n        super().__init__()\n        self.fc = nn.Linear(dim, 4 * dim)\n';
  const pl101 = (text: string, ws: Record<string, unknown> = {}) => {
    const { tree, findings } = analyzeText(parser, text, resolveSettings({}), ws);
    tree?.delete();
    return findings.filter((f) => f.code === 'PL101').length;
  };

  it('no te.* conversion where the file or another analysed file converts or quantizes the model', () => {
    assert.equal(pl101(MLP), 1);
    assert.equal(pl101(MLP, { otherStack: 'convert_to_float8_training' }), 0);
    assert.equal(pl101(`${MLP}from transformers import BitsAndBytesConfig\nq = BitsAndBytesConfig(load_in_4bit=True)\n`), 0);
    assert.equal(pl101(`${MLP}m = AutoModelForCausalLM.from_pretrained("x", load_in_8bit=True)\n`), 0);
  });

  it('a stack applies to the files its file imports (by module name), not to every analysed file', () => {
    const a = analyzeText(parser, 'import torch\nfrom torchao.float8 import convert_to_float8_training\nfrom pkg.model import MLP\nm = MLP()\nconvert_to_float8_training(m)\n', resolveSettings({}), {});
    a.tree?.delete();
    const b = analyzeText(parser, MLP, resolveSettings({}), {});
    b.tree?.delete();
    const ws = workspaceFactsOf([a.ir, b.ir]);
    assert.equal(stackFor(ws, '/repo/pkg/model.py'), 'convert_to_float8_training');
    assert.equal(stackFor(ws, 'pkg/model.py'), 'convert_to_float8_training');
    assert.equal(stackFor(ws, 'model.py'), undefined); // only pkg.model is imported
    assert.equal(stackFor(ws, '/repo/pkg/__init__.py'), 'convert_to_float8_training');
    assert.equal(stackFor(ws, '/repo/other/vit.py'), undefined);
    assert.equal(workspaceFactsOf([b.ir]).stackImports, undefined);
  });

  it('a file that imports only a library built on torch (accelerate) is analysed', () => {
    const { tree, findings } = analyzeText(parser, 'from accelerate import Accelerator\nacc = Accelerator(mixed_precision="fp8")\n', resolveSettings({}), { anyAutocastRegion: true });
    tree?.delete();
    assert.ok(findings.some((f) => f.code === 'PL201'));
  });
});

describe('rules: PL201 on a Transformer Engine lm-head (issue 23)', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });
  const HEAD = `import torch
from torch import nn
from transformer_engine.pytorch.module.linear import Linear as LinearTE

class LM(nn.Module):
    def __init__(self, vocab_size: int = 32000, dim: int = 1024):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.proj = LinearTE(dim, dim)
        self.output = LinearTE(dim, vocab_size, bias=False)

    def forward(self, ids):
        return self.output(self.proj(self.embed(ids)))
`;
  const codes = (facts: { anyAutocastRegion?: boolean; anyTraining?: boolean }): string[] => {
    const { tree, findings } = analyzeText(parser, HEAD, resolveSettings({}), facts);
    tree?.delete();
    return findings.filter((f) => f.code === 'PL201').map((f) => f.message);
  };

  it('a head imported by module path (transformer_engine.pytorch.module.linear.Linear) is flagged in a model file checked alone', () => {
    const msgs = codes({ anyAutocastRegion: false, anyTraining: false });
    assert.equal(msgs.length, 1, msgs.join(' | '));
    assert.match(msgs[0], /self\.output: the lm-head is a LinearTE, so FP8 autocast runs it in FP8/);
    assert.equal(codes({ anyAutocastRegion: true }).length, 1);
  });

  it('is quiet where the analysed files train the model and none enters FP8 autocast (FP8 is off: PL302 says so)', () => {
    assert.deepEqual(codes({ anyAutocastRegion: false, anyTraining: true }), []);
  });
});
