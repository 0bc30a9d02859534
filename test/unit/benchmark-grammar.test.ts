/**
 * The benchmark log grammar (syntaxes/benchmark-log.tmLanguage.json), tokenised with the engine VS Code uses
 * (vscode-textmate + Oniguruma WASM): phases, ratios, errors, GPU names and the extension's own log lines.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as oniguruma from 'vscode-oniguruma';
import * as vsctm from 'vscode-textmate';

const root = path.resolve(__dirname, '..', '..');
const grammarPath = path.join(root, 'syntaxes', 'benchmark-log.tmLanguage.json');
const SCOPE = 'text.log.precision-lens-benchmark';

let grammar: vsctm.IGrammar;

/** The scopes of the first token covering `needle` in `line`. */
function scopesOf(line: string, needle: string): string[] {
  const at = line.indexOf(needle);
  assert.ok(at >= 0, `${needle} in ${line}`);
  const { tokens } = grammar.tokenizeLine(line, vsctm.INITIAL);
  const token = tokens.find((t) => t.startIndex <= at && t.endIndex > at);
  return token ? token.scopes : [];
}

function hasScope(line: string, needle: string, scope: RegExp): void {
  const scopes = scopesOf(line, needle);
  assert.ok(scopes.some((s) => scope.test(s)), `${JSON.stringify(needle)} in ${JSON.stringify(line)}: ${scopes.join(' ')}`);
}

describe('benchmark log grammar', () => {
  before(async () => {
    const wasm = fs.readFileSync(require.resolve('vscode-oniguruma/release/onig.wasm'));
    await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
    const registry = new vsctm.Registry({
      onigLib: Promise.resolve({
        createOnigScanner: (sources: string[]) => new oniguruma.OnigScanner(sources),
        createOnigString: (s: string) => new oniguruma.OnigString(s),
      }),
      loadGrammar: async (scopeName) => (scopeName === SCOPE ? vsctm.parseRawGrammar(fs.readFileSync(grammarPath, 'utf8'), grammarPath) : null),
    });
    const g = await registry.loadGrammar(SCOPE);
    assert.ok(g);
    grammar = g;
  });

  it('is the grammar package.json contributes for the log language', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    const contributed = pkg.contributes.grammars.find((g: { language?: string }) => g.language === 'precision-lens-benchmark-log');
    assert.equal(contributed.scopeName, SCOPE);
    assert.equal(path.resolve(root, contributed.path), grammarPath);
  });

  it('colours phases', () => {
    hasScope('phase: warmup (te)', 'warmup', /entity\.name\.section\.phase/);
    hasScope('== bf16: gpt-125m, 10 warm-up + 30 measured steps, compile=True', 'warm-up', /phase/);
    hasScope('[te] first step 12.3 s (includes compilation)', 'compilation', /phase/);
  });

  it('colours ratios', () => {
    hasScope('ratio torch-fp8/bf16: speed 1.34x, memory 0.92x', '1.34x', /constant\.numeric\.ratio/);
    hasScope('ratio torch-fp8/bf16: speed 1.34x, memory 0.92x', 'ratio', /keyword\.control\.ratio/);
    hasScope('GEMM largest 4096x14336x4096: BF16 700 TFLOP/s, FP8 1300 TFLOP/s (1.86x)', '1.86x', /ratio/);
  });

  it('colours errors, warnings and tracebacks', () => {
    hasScope('error [no_cuda]: no CUDA device: the benchmark needs an NVIDIA GPU', 'error', /invalid\.illegal/);
    hasScope('error no_cuda: no CUDA device -- run it on a GPU', 'no_cuda', /error-code/);
    hasScope('WARNING: --device cpu runs the harness on the CPU', 'WARNING', /warning/);
    hasScope('Traceback (most recent call last):', 'Traceback', /invalid\.illegal\.traceback/);
    hasScope('RuntimeError: CUDA error: out of memory', 'RuntimeError', /invalid\.illegal\.exception/);
  });

  it('colours GPU names and capabilities', () => {
    hasScope('torch 2.11.0, CUDA 13.0, GPU NVIDIA H200 (sm_90), TE not installed', 'H200', /entity\.name\.tag\.gpu/);
    hasScope('torch 2.11.0, CUDA 13.0, GPU NVIDIA H200 (sm_90), TE not installed', 'sm_90', /capability/);
    hasScope('running on NVIDIA GeForce RTX 4090', 'RTX 4090', /gpu/);
    hasScope('A100-SXM4-80GB found', 'A100', /gpu/);
  });

  it('colours results and quantities', () => {
    const line = 'result te: 12,345 tokens/s, step 12.3 ms (p90 13.0 ms), peak 10.2 GiB, 1.32x vs BF16';
    hasScope(line, 'result', /keyword\.control\.result/);
    hasScope(line, 'te', /backend/);
    hasScope(line, '12,345 tokens/s', /quantity/);
    hasScope(line, '10.2 GiB', /quantity/);
  });
});
