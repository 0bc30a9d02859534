import { strict as assert } from 'node:assert';
import { analyze, initParser, py } from './analysis-helpers';

describe('analysis: broken and hostile input', () => {
  before(initParser);

  it('analyses what is sound in broken Python', () => {
    const ir = analyze(py`
      import torch.nn as nn
      s = "unterminated
      class A(nn.Module):
          def __init__(self):
              super().__init__()
              self.fc = nn.Linear(64, 64)
      	    self.bad = nn.Linear(
      def half_typed(x
      self.lm_head = nn.Linear(64, vocab_size
    `);
    assert.equal(ir.hasSyntaxErrors, true);
    assert.equal(ir.analysisError, undefined);
    assert.ok(ir.layers.some((l) => l.kind === 'linear'));
  });

  it('never throws on binary garbage, empty input or a 5 MB file', function () {
    this.timeout(60000);
    let garbage = '';
    for (let i = 0; i < 20000; i++) garbage += String.fromCharCode((i * 7919) % 65536);
    for (const src of ['', '\u0000\u0001\u0002', garbage, '(' .repeat(5000), 'nn.Linear(' .repeat(2000)]) {
      const ir = analyze(src);
      assert.ok(Array.isArray(ir.layers));
    }
    const block = py`
      class M${'$'}(nn.Module):
          def __init__(self, d=1024):
              super().__init__()
              self.fc = nn.Linear(d, 4 * d)
    `;
    let big = 'import torch.nn as nn\n';
    for (let i = 0; big.length < 5 * 1024 * 1024; i++) big += block.replace('$', String(i));
    const ir = analyze(big);
    assert.ok(ir.layers.length > 10000);
  });
});
