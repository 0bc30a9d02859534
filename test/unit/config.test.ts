/** [tool.precision-lens] in pyproject.toml: one loader for the CLI and the editor, merged into the one settings type. */
import * as assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveSettings } from '../../common/settings';
import { settingsFromOptions } from '../../server/src/cli';
import { parseArgs, type CliOptions } from '../../server/src/cli/args';
import { findProjectConfig, overlaySettings, projectConfigFromToml } from '../../server/src/engine/config';

const TABLE = `[project]
name = "demo"

[tool.ruff]
line-length = 100

[tool.precision-lens]
te-api = "modern"
target-gpu = "hopper"
recipe = "Float8CurrentScaling"
fallback-module = "utils/fp8_fallback.py"
ignore = ["PL402", "fuse-norm-mlp"]

[tool.precision-lens.rules]
PL201 = "error"
linear-to-te = "hint"

[tool.precision-lens.dims]
hidden_size = 4096
presets = [1024, 2048]
`;

function cliOptions(argv: string[]): CliOptions {
  const parsed = parseArgs(argv);
  if (parsed.kind !== 'run') throw new Error('not a run');
  return parsed.options;
}

describe('config: [tool.precision-lens] in pyproject.toml', () => {
  it('reads every key into the raw settings shape, rule names and codes alike', () => {
    const c = projectConfigFromToml(TABLE, '/p/pyproject.toml')!;
    assert.deepEqual(c.problems, []);
    assert.deepEqual(c.settings, {
      targetGpu: 'hopper', fallbackModule: 'utils/fp8_fallback.py', dims: { hidden_size: 4096, presets: [1024, 2048] },
      te: { apiVersion: 'modern', recipe: 'Float8CurrentScaling' },
      rules: { PL402: 'off', PL105: 'off', PL201: 'error', PL101: 'hint' },
    });
    const s = resolveSettings(c.settings);
    assert.equal(s.te.apiVersion, 'modern');
    assert.equal(s.targetGpu, 'hopper');
    assert.deepEqual(s.rules, { PL402: 'off', PL105: 'off', PL201: 'error', PL101: 'hint' });
  });

  it('says what is wrong, one sentence each, and keeps the rest', () => {
    const c = projectConfigFromToml('[tool.precision-lens]\nte-api = "newest"\ncolour = "red"\nignore = ["PL999"]\ntarget-gpu = "ada"\n[tool.precision-lens.rules]\nPL101 = "loud"\n', 'x')!;
    assert.deepEqual(c.settings, { targetGpu: 'ada' });
    assert.equal(c.problems.length, 4, c.problems.join('\n'));
    assert.match(c.problems.join(' '), /te-api = "newest" is not one of auto, legacy, modern.*Unknown key "colour".*unknown rule "PL999".*PL101 = "loud"/);
  });

  it('a file without the table is not ours; broken TOML is reported only when it mentions the table', () => {
    assert.equal(projectConfigFromToml('[tool.ruff]\nline-length = 88\n', 'x'), undefined);
    assert.equal(projectConfigFromToml('this is [not toml', 'x'), undefined);
    const broken = projectConfigFromToml('[tool.precision-lens]\nte-api = \n', '/p/pyproject.toml')!;
    assert.deepEqual(broken.settings, {});
    assert.match(broken.problems[0], /^\/p\/pyproject\.toml is not valid TOML \(.+\); \[tool\.precision-lens\] is ignored\.$/);
  });

  it('is found by walking up from the file, past a pyproject.toml without the table, and re-read when it changes', () => {
    const root = mkdtempSync(join(tmpdir(), 'pl-config-'));
    try {
      mkdirSync(join(root, 'pkg', 'models'), { recursive: true });
      writeFileSync(join(root, 'pyproject.toml'), '[tool.precision-lens]\ntarget-gpu = "ada"\n');
      writeFileSync(join(root, 'pkg', 'pyproject.toml'), '[tool.black]\nline-length = 88\n');
      const found = findProjectConfig(join(root, 'pkg', 'models'))!;
      assert.equal(found.path, join(root, 'pyproject.toml'));
      assert.deepEqual(found.settings, { targetGpu: 'ada' });
      writeFileSync(join(root, 'pyproject.toml'), '[tool.precision-lens]\ntarget-gpu = "blackwell"\n');
      const later = new Date(Date.now() + 5000);
      utimesSync(join(root, 'pyproject.toml'), later, later);
      assert.deepEqual(findProjectConfig(join(root, 'pkg', 'models'))!.settings, { targetGpu: 'blackwell' });
      assert.equal(findProjectConfig(tmpdir()), undefined);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('precedence: the editor settings, then the project table, then command-line flags; rules and dims merge per key', () => {
    const project = projectConfigFromToml(TABLE, 'x')!.settings;
    const editor = { rules: { PL301: 'hint', PL201: 'warning' }, te: { apiVersion: 'legacy', fp8Format: 'E4M3' }, targetGpu: 'any', dims: { dim: 512 } };
    const merged = resolveSettings(overlaySettings(editor, project));
    assert.deepEqual(merged.rules, { PL301: 'hint', PL201: 'error', PL402: 'off', PL105: 'off', PL101: 'hint' });
    assert.deepEqual(merged.te, { apiVersion: 'modern', recipe: 'Float8CurrentScaling', fp8Format: 'E4M3' });
    assert.equal(merged.targetGpu, 'hopper');
    assert.deepEqual(overlaySettings(editor, project).dims, { dim: 512, hidden_size: 4096, presets: [1024, 2048] });
    // The one settings type carries them (precisionLens.dims and [tool.precision-lens.dims] merged) to the analysis.
    assert.deepEqual(merged.dims, { dim: 512, hidden_size: 4096, presets: [1024, 2048] });
    const cli = settingsFromOptions(cliOptions(['check', 'x', '--te-api', 'legacy', '--rule', 'PL201=hint']), project);
    assert.equal(cli.te.apiVersion, 'legacy');
    assert.equal(cli.rules.PL201, 'hint');
    assert.equal(cli.rules.PL402, 'off');
    assert.equal(cli.targetGpu, 'hopper');
    assert.equal(settingsFromOptions(cliOptions(['check', 'x'])).te.apiVersion, 'auto');
  });
});
