/**
 * Shared by the fixes tests: the real parser and analysis, the real rules, and the Python compiler as the judge of
 * "valid Python".
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_SETTINGS, type PrecisionLensSettings } from '../../common/settings';
import { analyzeTree } from '../../server/src/analysis';
import type { ModelIR } from '../../server/src/analysis/ir';
import { createPythonParser, type Parser, type SyntaxNode } from '../../server/src/engine/parser';
import { runRules } from '../../server/src/rules';
import type { RuleCode } from '../../common/codes';
import type { Finding, WorkspaceFacts } from '../../server/src/rules/types';
import { tempDir } from '../temp-dirs';

export const FIXTURES = join(__dirname, '..', 'fixtures', 'fixes');
export const PYTHON = '/usr/bin/python3';

let parserPromise: Promise<Parser> | undefined;
export function parser(): Promise<Parser> {
  parserPromise ??= createPythonParser();
  return parserPromise;
}

/** The project's fallback module, as the fixes of a file beside it see it. */
export const FALLBACK_MODULE = { importFrom: 'fp8_fallback', path: '/p/fp8_fallback.py', exists: true };

/** The IR of `text` and the findings of one rule on it (default settings, the workspace facts given). */
export async function checkRule(code: RuleCode, text: string, workspace: WorkspaceFacts = {}): Promise<{ ir: ModelIR; findings: Finding[] }> {
  const tree = (await parser()).parse(text)!;
  try {
    const ir = analyzeTree(tree, text);
    return { ir, findings: runRules({ ir, text, settings: DEFAULT_SETTINGS, workspace }).filter((f) => f.code === code) };
  } finally {
    tree.delete();
  }
}

export interface Analysed {
  ir: ModelIR;
  findings: Finding[];
  /** ERROR and MISSING nodes in the parse. */
  errorNodes: number;
}

function countErrors(node: SyntaxNode): number {
  let n = node.isError || node.isMissing ? 1 : 0;
  if (!node.hasError && n === 0) return 0;
  for (const c of node.children) if (c) n += countErrors(c);
  return n;
}

/**
 * The settings of the fix-mechanics tests: every convertible layer is converted, also those the H200 table predicts
 * to run slower in FP8 (the fixtures are small models: 768 wide and less). The default, which leaves those in BF16,
 * has its own tests (gain-wired.test.ts).
 */
export const MECHANICS_SETTINGS: PrecisionLensSettings = { ...DEFAULT_SETTINGS, convertLosingLayers: true };

/** Parses and analyses text; findings use the given settings and a workspace where FP8 autocast runs somewhere. */
export async function analyse(text: string, settings: PrecisionLensSettings = MECHANICS_SETTINGS): Promise<Analysed> {
  const tree = (await parser()).parse(text);
  if (!tree) throw new Error('parse failed');
  try {
    const ir = analyzeTree(tree, text);
    const findings = runRules({ ir, text, settings, workspace: { anyAutocastRegion: true } });
    return { ir, findings, errorNodes: countErrors(tree.rootNode) };
  } finally {
    tree.delete();
  }
}

const pythonOk = spawnSync(PYTHON, ['-c', 'pass']).status === 0;
let scratch: string | undefined;

/** py_compile's error message, or undefined when the text compiles (or no Python is available). */
export function pyCompileError(text: string, name = 'fixed.py'): string | undefined {
  if (!pythonOk) return undefined;
  scratch ??= tempDir('pl-fixes-');
  const file = join(scratch, name);
  writeFileSync(file, text);
  const r = spawnSync(PYTHON, ['-m', 'py_compile', file], { encoding: 'utf8' });
  return r.status === 0 ? undefined : r.stderr || r.stdout || `exit ${r.status}`;
}

/** Many texts in one interpreter: { index: error } for those that do not compile. */
export function pyCompileMany(texts: string[]): Map<number, string> {
  const bad = new Map<number, string>();
  if (!pythonOk || !texts.length) return bad;
  scratch ??= tempDir('pl-fixes-');
  const file = join(scratch, 'batch.json');
  writeFileSync(file, JSON.stringify(texts));
  const script = 'import json,sys\nfor i,t in enumerate(json.load(open(sys.argv[1]))):\n  try: compile(t, "fixed.py", "exec")\n  except SyntaxError as e: print(json.dumps([i, str(e)]))\n';
  const r = spawnSync(PYTHON, ['-c', script, file], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  for (const line of r.stdout.split('\n').filter(Boolean)) {
    const [i, msg] = JSON.parse(line) as [number, string];
    bad.set(i, msg);
  }
  return bad;
}

export function settingsWith(te: Partial<PrecisionLensSettings['te']>): PrecisionLensSettings {
  return { ...MECHANICS_SETTINGS, te: { ...DEFAULT_SETTINGS.te, ...te } };
}
