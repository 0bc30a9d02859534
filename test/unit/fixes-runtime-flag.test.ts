/**
 * A norm whose affine flag or bias is decided at run time converts through the fallback's `fp8_layernorm_or(lambda:
 * <the call as written>, ..., when=<flag>)`. A call written over several lines is copied behind the lambda on one
 * line, so the conversion adds no line: every line below keeps its number (diffs, `# noqa` lines, the eval's labels).
 */
import * as assert from 'node:assert/strict';
import { applyEdits, sourceFixes, type Fix } from '../../server/src/fixes';
import { analyse, MECHANICS_SETTINGS, pyCompileError } from './fixes-support';

const INPUT = `import torch.nn as nn


class Block(nn.Module):
    def __init__(self, config, dim):
        super().__init__()
        self.norm = nn.LayerNorm(
            dim, elementwise_affine=config.affine  # the config decides
        )
        self.final_norm = nn.LayerNorm(
            dim, elementwise_affine=config.affine
        )
        self.cont = nn.LayerNorm(dim, \\
                                 elementwise_affine=config.affine)
        self.fc = nn.Linear(dim, 4 * dim)

    def forward(self, x):
        return self.fc(self.final_norm(self.norm(x)))
`;

describe('fixes: norms with a flag decided at run time', () => {
  it('convert with when=<flag>, the lambda on one line, no line added; a call with a comment is copied as written', async () => {
    const { ir } = await analyse(INPUT);
    const fix = sourceFixes(INPUT, ir, MECHANICS_SETTINGS).find((f: Fix) => f.id === 'convert-all:file');
    assert.ok(fix, 'convert-all offered');
    const text = applyEdits(INPUT, fix.edits);
    assert.match(text, /self\.final_norm = fp8_layernorm_or\(lambda: nn\.LayerNorm\(dim, elementwise_affine=config\.affine\),\n {12}dim, when=config\.affine\n {8}\)/);
    // The comment inside the call: copying it onto one line would comment out the rest, so it is copied as written.
    assert.match(text, /self\.norm = fp8_layernorm_or\(lambda: nn\.LayerNorm\(\n {12}dim, elementwise_affine=config\.affine  # the config decides\n {8}\),/);
    // A backslash continuation: joining the lines would leave a stray backslash, so it is copied as written too.
    assert.match(text, /self\.cont = fp8_layernorm_or\(lambda: nn\.LayerNorm\(dim, \\\n {33}elementwise_affine=config\.affine\), dim, when=config\.affine\)\n/);
    // final_norm feeds only fc: fused where FP8 runs and the flag left it a weight (fp8_fuse_norm checks that at run time).
    assert.match(text, /self\.fc = fp8_fuse_norm\(self\.final_norm, fp8_linear\(dim, 4 \* dim\)\)/);
    const lineOf = (t: string, s: string) => t.split('\n').findIndex((l) => l.includes(s));
    // Below the class line (imports are added above it), only the call copied with its comment adds lines: its two
    // (the continued one keeps two lines: its own argument line goes with the dropped flag).
    assert.equal(lineOf(text, 'self.fc =') - lineOf(text, 'class Block'), lineOf(INPUT, 'self.fc =') - lineOf(INPUT, 'class Block') + 2);
    assert.equal(pyCompileError(text), undefined);
  });
});
