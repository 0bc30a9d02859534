/** Shared helpers for the analysis tests: one parser, text in, IR out. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createPythonParser, type Parser } from '../../server/src/engine/parser';
import { analyzeTree, type AnalysisOptions } from '../../server/src/analysis';
import type { Layer, ModelIR } from '../../server/src/analysis/ir';

let parser: Parser | undefined;

export async function initParser(): Promise<void> {
  parser ??= await createPythonParser();
}

/** Parses and analyses Python source (call initParser in a before hook first). */
export function analyze(src: string, options?: AnalysisOptions): ModelIR {
  if (!parser) throw new Error('initParser() first');
  const tree = parser.parse(src);
  if (!tree) throw new Error('parse failed');
  try {
    return analyzeTree(tree, src, undefined, options);
  } finally {
    tree.delete();
  }
}

export function fixture(name: string): string {
  return readFileSync(join(__dirname, '..', 'fixtures', 'analysis', name), 'utf8');
}

/** The single layer with that name (fails loudly when missing or ambiguous). */
export function layer(ir: ModelIR, name: string, index = 0): Layer {
  const hits = ir.layers.filter((l) => l.name === name);
  if (!hits[index]) throw new Error(`no layer ${name}[${index}]; have: ${ir.layers.map((l) => l.name).join(', ')}`);
  return hits[index];
}

/** Python source from an indented template literal. */
export function py(strings: TemplateStringsArray, ...values: unknown[]): string {
  const raw = strings.reduce((acc, s, i) => acc + s + (i < values.length ? String(values[i]) : ''), '');
  const lines = raw.replace(/^\n/, '').split('\n');
  const indent = Math.min(...lines.filter((l) => l.trim()).map((l) => /^ */.exec(l)![0].length));
  return lines.map((l) => l.slice(indent)).join('\n');
}
