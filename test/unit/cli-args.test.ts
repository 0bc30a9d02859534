/** The command line parser on its own (no process): flags, defaults, and what counts as a usage error. */
import * as assert from 'node:assert/strict';
import { parseArgs, UsageError, type CliOptions } from '../../server/src/cli/args';

function options(argv: string[]): CliOptions {
  const parsed = parseArgs(argv);
  assert.equal(parsed.kind, 'run');
  return (parsed as { options: CliOptions }).options;
}

describe('cli args', () => {
  it('has the contract defaults: text format, fail on warning', () => {
    const o = options(['check', 'src']);
    assert.deepEqual(
      { command: o.command, paths: o.paths, format: o.format, failOn: o.failOn, rules: o.rules, fix: o.fix, diff: o.diff },
      { command: 'check', paths: ['src'], format: 'text', failOn: 'warning', rules: {}, fix: false, diff: false },
    );
    assert.equal(options(['inspect', 'src']).format, 'json');
  });

  it('takes flags before, between and after paths, as --flag value or --flag=value', () => {
    const o = options(['check', '--format=sarif', 'a.py', '--fail-on', 'hint', 'b', '--rule', 'PL101=off,pl201=error', '--rule=fuse-norm-mlp=warning',
      '--te-api', 'legacy', '--target-gpu', 'ada', '--fix', '--diff', '--', '--odd-name.py']);
    assert.deepEqual(o.paths, ['a.py', 'b', '--odd-name.py']);
    assert.equal(o.format, 'sarif');
    assert.equal(o.failOn, 'hint');
    assert.deepEqual(o.rules, { PL101: 'off', PL201: 'error', PL105: 'warning' });
    assert.equal(o.teApi, 'legacy');
    assert.equal(o.targetGpu, 'ada');
    assert.ok(o.fix && o.diff);
  });

  it('fix flags as in ruff: --diff implies --fix; --unsafe-fixes, --show-fixes and --isolated are switches', () => {
    const d = options(['check', 'x', '--diff']);
    assert.ok(d.fix && d.diff && !d.unsafeFixes);
    const u = options(['check', 'x', '--fix', '--unsafe-fixes', '--show-fixes', '--isolated']);
    assert.ok(u.fix && !u.diff && u.unsafeFixes && u.showFixes && u.isolated);
    assert.ok(options(['check', 'x', '--unsafe-fixes']).unsafeFixes && !options(['check', 'x', '--unsafe-fixes']).fix);
  });

  it('recognises help, version and the hidden bench command', () => {
    assert.equal(parseArgs(['--help']).kind, 'help');
    assert.equal(parseArgs(['check', 'x', '-h']).kind, 'help');
    assert.equal(parseArgs(['--version']).kind, 'version');
    assert.deepEqual(parseArgs(['__bench', 'full', 'f.py']), { kind: 'bench', args: ['full', 'f.py'] });
  });

  for (const argv of [
    [], ['lint'], ['check'], ['check', 'x', '--format', 'xml'], ['check', 'x', '--fail-on'], ['check', 'x', '--rule', 'PL000=off'],
    ['check', 'x', '--rule', 'PL101=loud'], ['check', 'x', '--rule', '=off'], ['check', 'x', '--te-api', '2.9'], ['check', 'x', '--target-gpu', 'volta'],
    ['inspect', 'x', '--unsafe-fixes'], ['check', 'x', '--fix=yes'], ['check', 'x', '--max-file-size', '-1'], ['inspect', 'x', '--format', 'sarif'],
    ['inspect', 'x', '--fix'], ['check', 'x', '--nope'],
  ]) {
    it(`rejects ${JSON.stringify(argv)}`, () => {
      assert.throws(() => parseArgs(argv), UsageError);
    });
  }
});
