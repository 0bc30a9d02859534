/**
 * The CLI path reads web-tree-sitter nodes directly, where each read of a child or a parent is a call into WASM that
 * makes a new node object. The sides of an assignment and a call's function and arguments are read once per analysis
 * (walk.ts leftOf/rightOf/calleeOf/argListOf), and a layer built on an assignment's right side gets its parent from the
 * walk (assignedBy), not from the tree. Counted through the real parser.
 */
import { strict as assert } from 'node:assert';
import { createPythonParser, type Parser } from '../../server/src/engine/parser';
import { analyzeTree } from '../../server/src/analysis';

const FIELDS = new Set(['left', 'right', 'function', 'arguments']);
const N = 120;

function source(): string {
  const lines = ['import torch.nn as nn', '', '', 'class Big(nn.Module):', '    def __init__(self, d=64):', '        super().__init__()'];
  for (let i = 0; i < N; i++) lines.push(`        self.fc${i} = nn.Linear(d, 4 * d, bias=False)`);
  lines.push('', '    def forward(self, x):');
  for (let i = 0; i < N; i++) lines.push(`        x = self.fc${i}(x)`);
  lines.push('        return x', '');
  return lines.join('\n');
}

interface Counts { fieldReads: Map<string, number>; parentReads: number }

/** Runs the cache-less analysis with the node prototype's childForFieldName and parent counted. */
function countedAnalysis(parser: Parser, src: string): { counts: Counts; layers: string[] } {
  const tree = parser.parse(src)!;
  const proto = Object.getPrototypeOf(tree.rootNode) as Record<string, unknown>;
  const field = Object.getOwnPropertyDescriptor(proto, 'childForFieldName')!;
  const parent = Object.getOwnPropertyDescriptor(proto, 'parent')!;
  const counts: Counts = { fieldReads: new Map(), parentReads: 0 };
  const readField = field.value as (this: { id: number }, name: string) => unknown;
  const readParent = parent.get as (this: unknown) => unknown;
  Object.defineProperty(proto, 'childForFieldName', {
    ...field,
    value(this: { id: number }, name: string) {
      if (FIELDS.has(name)) counts.fieldReads.set(`${this.id}:${name}`, (counts.fieldReads.get(`${this.id}:${name}`) ?? 0) + 1);
      return readField.call(this, name);
    },
  });
  Object.defineProperty(proto, 'parent', { ...parent, get(this: unknown) { counts.parentReads++; return readParent.call(this); } });
  try {
    const ir = analyzeTree(tree, src);
    return { counts, layers: ir.layers.map((l) => l.name) };
  } finally {
    Object.defineProperty(proto, 'childForFieldName', field);
    Object.defineProperty(proto, 'parent', parent);
    tree.delete();
  }
}

describe('analysis: web-tree-sitter node reads on the cache-less path', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });
  after(() => parser.delete());

  it('reads an assignment\'s sides and a call\'s function and arguments once per layer, and no parent per layer', () => {
    const { counts, layers } = countedAnalysis(parser, source());
    assert.deepEqual(layers, Array.from({ length: N }, (_, i) => `self.fc${i}`));
    // Per layer and per forward line, nothing is read twice (a pass run once per class, such as the lm-head's
    // search for the last projection, may walk up from one call and read its assignment's sides again).
    const repeated = [...counts.fieldReads].filter(([, n]) => n > 1);
    assert.ok(repeated.length < N / 10, `${repeated.length} (node, field) pairs read more than once: ${repeated.slice(0, 5).join(' ')}`);
    // Every layer (and every forward line) sits on an assignment's right side: placement takes that parent from the walk.
    assert.ok(counts.parentReads < N / 4, `parent read ${counts.parentReads} times for ${N} layers`);
  });
});
