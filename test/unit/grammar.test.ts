/**
 * The Python injection grammar (syntaxes/precision.injection.tmLanguage.json), tokenised with the engine VS Code uses
 * (vscode-textmate + the Oniguruma WASM of vscode-oniguruma). The host Python grammar is a small stand-in that knows
 * only comments, strings and calls, so the test needs nothing outside node_modules; when code-server is installed
 * (.vscode-test/code-server), the same lines are also checked against VS Code's real Python grammar (MagicPython).
 */
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import * as oniguruma from 'vscode-oniguruma';
import * as vsctm from 'vscode-textmate';

const root = path.resolve(__dirname, '..', '..');
const grammarPath = path.join(root, 'syntaxes', 'precision.injection.tmLanguage.json');
const SCOPE = 'source.python.precision-lens';
const magicPython = path.join(root, '.vscode-test', 'code-server', 'node_modules', 'code-server', 'lib', 'vscode',
  'extensions', 'python', 'syntaxes', 'MagicPython.tmLanguage.json');

/** A minimal host grammar: enough structure (comments, strings, a call with arguments) to test the injection selector. */
const STUB_PYTHON = {
  scopeName: 'source.python',
  patterns: [
    { name: 'comment.line.number-sign.python', match: '#.*$' },
    { name: 'string.quoted.double.python', begin: '"', end: '"' },
    { name: 'string.quoted.single.python', begin: "'", end: "'" },
    { name: 'meta.function-call.python', begin: '\\(', end: '\\)', patterns: [{ include: '$self' }] },
    { name: 'keyword.control.flow.python', match: '\\b(with|as|import|from)\\b' },
  ],
};

let onigReady: Promise<void> | undefined;
function onigLib(): Promise<vsctm.IOnigLib> {
  onigReady ??= (async () => {
    const wasm = fs.readFileSync(require.resolve('vscode-oniguruma/release/onig.wasm'));
    await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  })();
  return onigReady.then(() => ({
    createOnigScanner: (sources: string[]) => new oniguruma.OnigScanner(sources),
    createOnigString: (s: string) => new oniguruma.OnigString(s),
  }));
}

async function loadPython(host: 'stub' | 'magic'): Promise<vsctm.IGrammar> {
  const registry = new vsctm.Registry({
    onigLib: onigLib(),
    loadGrammar: async (scopeName) => {
      if (scopeName === SCOPE) return vsctm.parseRawGrammar(fs.readFileSync(grammarPath, 'utf8'), grammarPath);
      if (scopeName === 'source.python') {
        if (host === 'stub') return vsctm.parseRawGrammar(JSON.stringify(STUB_PYTHON), 'stub.json');
        return vsctm.parseRawGrammar(fs.readFileSync(magicPython, 'utf8'), magicPython);
      }
      return null;
    },
    // What package.json's `injectTo: ["source.python"]` makes VS Code do.
    getInjections: (scopeName) => (scopeName === 'source.python' ? [SCOPE] : undefined),
  });
  const g = await registry.loadGrammar('source.python');
  assert.ok(g, 'python grammar loads');
  return g;
}

/** The scopes of the first token whose text is `text` (and which starts at or after `from`). */
function scopesOf(grammar: vsctm.IGrammar, line: string, text: string, from = 0): string[] {
  const { tokens } = grammar.tokenizeLine(line, vsctm.INITIAL);
  const at = line.indexOf(text, from);
  assert.ok(at >= 0, `${text} in ${line}`);
  const token = tokens.find((t) => t.startIndex === at && t.endIndex === at + text.length);
  if (!token) {
    const seen = tokens.map((t) => `${JSON.stringify(line.slice(t.startIndex, t.endIndex))}=${t.scopes.slice(1).join(' ')}`);
    assert.fail(`no token exactly ${JSON.stringify(text)} in ${JSON.stringify(line)}; tokens: ${seen.join(', ')}`);
  }
  return token.scopes;
}

function hasScope(scopes: string[], prefix: string): boolean {
  return scopes.some((s) => s.split(' ').some((one) => one === prefix || one.startsWith(`${prefix}.`)));
}

/** [line, token text, expected scope prefix] */
const POSITIVE: Array<[string, string, string]> = [
  ['        self.fc1 = te.Linear(hidden, 4 * hidden, bias=True)', 'Linear', 'support.class.te.precision-lens'],
  ['        self.fc1 = te.Linear(hidden, 4 * hidden, bias=True)', 'te', 'entity.name.namespace.te.precision-lens'],
  ['        self.mlp = te.LayerNormMLP(hidden, ffn)', 'LayerNormMLP', 'support.class.te.precision-lens'],
  ['layer = transformer_engine.pytorch.Linear(768, 768)', 'Linear', 'support.class.te.precision-lens'],
  ['ok = te.is_fp8_available()', 'is_fp8_available', 'entity.name.function.te.precision-lens'],
  ['with te.fp8_autocast(enabled=True, fp8_recipe=fp8_recipe):', 'fp8_autocast', 'entity.name.function.autocast.precision-lens'],
  ['with te.autocast(recipe=recipe):', 'autocast', 'entity.name.function.autocast.precision-lens'],
  ['with fp8_autocast(enabled=True):', 'fp8_autocast', 'entity.name.function.autocast.precision-lens'],
  ['with torch.autocast("cuda", dtype=torch.bfloat16):', 'autocast', 'entity.name.function.autocast.precision-lens'],
  ['with te.fp8_model_init(enabled=True):', 'fp8_model_init', 'entity.name.function.autocast.precision-lens'],
  ['fp8_recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16)', 'DelayedScaling', 'support.class.recipe.precision-lens'],
  ['fp8_recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16)', 'HYBRID', 'support.constant.fp8-format.precision-lens'],
  ['r = recipe.Float8CurrentScaling(fp8_format=recipe.Format.E4M3)', 'Float8CurrentScaling', 'support.class.recipe.precision-lens'],
  ['r = recipe.Float8CurrentScaling(fp8_format=recipe.Format.E4M3)', 'E4M3', 'support.constant.fp8-format.precision-lens'],
  ['r = Float8BlockScaling()', 'Float8BlockScaling', 'support.class.recipe.precision-lens'],
  ['r = MXFP8BlockScaling()', 'MXFP8BlockScaling', 'support.class.recipe.precision-lens'],
  ['r = NVFP4BlockScaling()', 'NVFP4BlockScaling', 'support.class.recipe.precision-lens'],
  ['bad = DelayedScaling(fp8_format=Format.E5M2)', 'E5M2', 'support.constant.fp8-format.precision-lens'],
  ['w8 = w.to(torch.float8_e4m3fn)', 'float8_e4m3fn', 'support.type.float8.precision-lens'],
  ['g8 = g.to(dtype=torch.float8_e5m2)', 'float8_e5m2', 'support.type.float8.precision-lens'],
  ['x = torch.empty(4, dtype=torch.float8_e4m3fnuz)', 'float8_e4m3fnuz', 'support.type.float8.precision-lens'],
];

/** [line, token text, scope prefix it must NOT have] */
const NEGATIVE: Array<[string, string, string]> = [
  ['# te.Linear(768, 768) would be faster', 'Linear', 'support.class.te.precision-lens'],
  ['msg = "use te.fp8_autocast(...) here"', 'fp8_autocast', 'entity.name.function.autocast.precision-lens'],
  ["name = 'DelayedScaling'", 'DelayedScaling', 'support.class.recipe.precision-lens'],
  ['state.Linear = 1', 'Linear', 'support.class.te.precision-lens'],
  ['self.proj = nn.Linear(768, 768)', 'Linear', 'support.class.te.precision-lens'],
  ['x = torch.bfloat16', 'bfloat16', 'support.type.float8.precision-lens'],
  ['DelayedScalingX = 3', 'DelayedScalingX', 'support.class.recipe.precision-lens'],
];

describe('syntaxes/precision.injection.tmLanguage.json', () => {
  const raw = JSON.parse(fs.readFileSync(grammarPath, 'utf8'));

  it('is the injection grammar package.json contributes', () => {
    assert.strictEqual(raw.scopeName, SCOPE);
    assert.match(raw.injectionSelector, /^L:source\.python\b/);
    assert.match(raw.injectionSelector, /-string/);
    assert.match(raw.injectionSelector, /-comment/);
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    const contributed = pkg.contributes.grammars.find((g: { scopeName: string }) => g.scopeName === SCOPE);
    assert.ok(contributed, 'package.json contributes the grammar');
    assert.deepStrictEqual(contributed.injectTo, ['source.python']);
    assert.strictEqual(path.resolve(root, contributed.path), grammarPath);
  });

  it('includes only repository entries that exist, each with a match and named captures', () => {
    for (const p of raw.patterns) {
      const key = String(p.include).replace(/^#/, '');
      assert.ok(raw.repository[key], `repository has ${key}`);
    }
    for (const [key, rule] of Object.entries<{ match: string; captures: Record<string, { name: string }> }>(raw.repository)) {
      assert.strictEqual(typeof rule.match, 'string', key);
      for (const c of Object.values(rule.captures)) assert.match(c.name, /\S/, `${key} capture name`);
      // every name this grammar adds ends in .precision-lens, or is the Python grammar's own period scope
      for (const c of Object.values(rule.captures)) assert.match(c.name, /\.precision-lens$|^punctuation\.separator\.period\.python$/);
    }
  });

  for (const host of ['stub', 'magic'] as const) {
    describe(`tokenised with ${host === 'stub' ? 'a stand-in' : "VS Code's MagicPython"} Python grammar`, () => {
      let grammar: vsctm.IGrammar;
      before(async function () {
        if (host === 'magic' && !fs.existsSync(magicPython)) this.skip();
        grammar = await loadPython(host);
      });

      for (const [line, text, scope] of POSITIVE) {
        it(`${text} in \`${line.trim()}\` is ${scope}`, () => {
          const scopes = scopesOf(grammar, line, text, text === 'te' ? line.indexOf('te.') : 0);
          assert.ok(hasScope(scopes, scope), `${text}: ${scopes.join(' | ')}`);
        });
      }
      for (const [line, text, scope] of NEGATIVE) {
        it(`${text} in \`${line.trim()}\` is not ${scope}`, () => {
          const { tokens } = grammar.tokenizeLine(line, vsctm.INITIAL);
          const at = line.indexOf(text);
          const covering = tokens.filter((t) => t.startIndex < at + text.length && t.endIndex > at);
          for (const t of covering) assert.ok(!hasScope(t.scopes, scope), `${text}: ${t.scopes.join(' | ')}`);
        });
      }
    });
  }
});
