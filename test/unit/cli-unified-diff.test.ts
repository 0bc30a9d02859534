/**
 * `--diff`'s unified diff (server/src/cli/unified-diff.ts): jsdiff's output where the changed middle is small, a
 * bounded alignment where it is large (a fix rewriting thousands of lines); either way `patch` and jsdiff's
 * applyPatch turn the old text into the new one.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { applyPatch, createTwoFilesPatch, FILE_HEADERS_ONLY } from 'diff';
import { unifiedDiff } from '../../server/src/cli/unified-diff';
import { prng } from '../../scripts/gen-large-model.mjs';

/** A random text of `n` lines from a small vocabulary (repeated lines, like code) and a mutated copy. */
function pair(seed: number, n: number): [string, string] {
  const r = prng(seed);
  const words = ['x = self.l0(x)', 'return x', '', '    pass', 'self.a = nn.Linear(64, 64)', 'def f():', '# note'];
  const a: string[] = [];
  for (let i = 0; i < n; i++) a.push(r() < 0.5 ? words[Math.floor(r() * words.length)] : `line ${Math.floor(r() * n)}`);
  const b: string[] = [];
  for (const line of a) {
    const p = r();
    if (p < 0.1) continue;
    if (p < 0.2) b.push(`${line} changed`);
    else if (p < 0.25) b.push(line, 'inserted');
    else b.push(line);
  }
  const end = (r() < 0.3 ? '' : '\n');
  return [a.join('\n') + end, b.join('\n') + (r() < 0.3 ? '' : '\n')];
}

function applies(before: string, after: string, patch: string, what: string): void {
  assert.equal(applyPatch(before, patch), after, `${what}: jsdiff applyPatch`);
  const which = spawnSync('patch', ['--version'], { encoding: 'utf8' });
  if (which.status !== 0) return;
  const dir = mkdtempSync(join(tmpdir(), 'pl-udiff-'));
  try {
    writeFileSync(join(dir, 'f.py'), before);
    const r = spawnSync('patch', ['-p1', '--quiet', '--no-backup-if-mismatch'], { cwd: dir, input: patch, encoding: 'utf8' });
    assert.equal(r.status, 0, `${what}: patch failed: ${r.stdout}${r.stderr}`);
    assert.equal(readFileSync(join(dir, 'f.py'), 'utf8'), after, `${what}: patch result`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('unified diff of --diff', () => {
  it('is jsdiff\'s own output when the changed middle is small', () => {
    for (let seed = 1; seed <= 30; seed++) {
      const [a, b] = pair(seed, 60);
      const mine = unifiedDiff('a/f.py', 'b/f.py', a, b);
      const theirs = createTwoFilesPatch('a/f.py', 'b/f.py', a, b, undefined, undefined, { context: 3, headerOptions: FILE_HEADERS_ONLY });
      assert.equal(mine, theirs, `seed ${seed}`);
    }
  });

  it('through the bounded alignment (forced), applies with patch and with jsdiff', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const [a, b] = pair(seed, 80);
      applies(a, b, unifiedDiff('a/f.py', 'b/f.py', a, b, 3, 0), `seed ${seed}`);
      applies(a, b, unifiedDiff('a/f.py', 'b/f.py', a, b, 3, 20), `seed ${seed}, small jsdiff stretches`);
    }
  });

  it('a fix rewriting 20,000 lines of a class plus an insertion at the top: one hunk per change, applies', () => {
    const layers = Array.from({ length: 20000 }, (_, i) => `        self.fz${i} = nn.Linear(64, 64)\n`);
    const gap = Array.from({ length: 10 }, (_, i) => `# ${i}\n`).join('');
    const before = `import torch\n${gap}\n\nclass Huge(nn.Module):\n    def __init__(self):\n${layers.join('')}\n    def forward(self, x):\n        return x\n`;
    const after = `import torch\nfrom fp8_fallback import fp8_linear\n${gap}\n\nclass Huge(nn.Module):\n    def __init__(self):\n${layers.map((l) => l.replace('nn.Linear', 'fp8_linear')).join('')}\n    def forward(self, x):\n        return x\n`;
    const patch = unifiedDiff('a/f.py', 'b/f.py', before, after);
    applies(before, after, patch, 'huge class');
    assert.equal((patch.match(/^@@/gm) ?? []).length, 2, 'the import and the class, each its own hunk');
    assert.equal((patch.match(/^-        self\.fz/gm) ?? []).length, 20000);
  });
});
