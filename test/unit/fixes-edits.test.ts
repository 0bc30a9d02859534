/** The text-level machinery under every fix: applying edits, argument surgery, statement scanning, indentation. */
import * as assert from 'node:assert/strict';
import { applyEdits, combineFixes, type Fix } from '../../server/src/fixes';
import { EditSet, editsConflict, insert, normalizeEdits, removeArgs, replace, type TextEdit } from '../../server/src/fixes/edits';
import { prng } from '../../server/src/cli/mutate';
import { indentUnit } from '../../server/src/fixes/indent';
import { afterImportsOffset } from '../../server/src/fixes/imports';
import { scanSource, splitCallArgs, statementAt, statementText } from '../../server/src/fixes/source';

function dropArgs(src: string, names: string[]): string {
  const call = splitCallArgs(src, src.indexOf('('))!;
  return applyEdits(src, removeArgs(src, call, call.args.filter((a) => names.includes(a.name ?? a.value))));
}

describe('fixes: edits', () => {
  it('applies edits in any order and merges identical or nested import insertions', () => {
    const text = 'import torch\nx = 1\n';
    const out = applyEdits(text, [replace(13, 14, 'y'), insert(13, 'import te\n'), insert(13, 'import te\n')]);
    assert.equal(out, 'import torch\nimport te\ny = 1\n');
  });

  it('refuses overlapping replacements', () => {
    assert.throws(() => applyEdits('abcdef', [replace(0, 3, 'x'), replace(2, 4, 'y')]), /overlap/);
  });

  it('combineFixes skips a fix that overlaps an accepted one', () => {
    const fix = (id: string, a: number, b: number): Fix => ({ id, title: id, kind: 'quickfix', codes: [], safe: true, edits: [replace(a, b, id)] });
    const r = combineFixes([fix('a', 0, 2), fix('b', 1, 3), fix('c', 4, 5)]);
    assert.deepEqual(r.applied.map((f) => f.id), ['a', 'c']);
    assert.deepEqual(r.skipped.map((f) => f.id), ['b']);
  });

  it('combineFixes keeps what re-normalizing per fix gave: the same fixes taken, the same merged edits', () => {
    // The reference: normalizeEdits over everything accepted so far, once per fix (what combineFixes did before).
    const random = prng(7);
    const int = (n: number) => Math.floor(random() * n);
    for (let t = 0; t < 5000; t++) {
      const fixes = Array.from({ length: 1 + int(6) }, () => Array.from({ length: 1 + int(3) }, (): TextEdit => {
        const start = int(12);
        return { startOffset: start, endOffset: random() < 0.4 ? start : start + int(4), newText: ['a', 'b', 'ab', ''][int(4)] };
      }));
      let reference: TextEdit[] = [];
      const taken: number[] = [];
      fixes.forEach((f, i) => { if (!editsConflict(reference, f)) { reference = normalizeEdits([...reference, ...f]); taken.push(i); } });
      const set = new EditSet();
      const setTaken = fixes.flatMap((f, i) => (set.tryAdd(f) ? [i] : []));
      assert.deepEqual(setTaken, taken, JSON.stringify(fixes));
      assert.deepEqual(set.edits, reference, JSON.stringify(fixes));
    }
  });

  it('removes arguments with exactly one comma, keeping layout and comments', () => {
    assert.equal(dropArgs('f(a, b=1)', ['b']), 'f(a)');
    assert.equal(dropArgs('f(b=1, a)', ['b']), 'f(a)');
    assert.equal(dropArgs('f(b=1)', ['b']), 'f()');
    assert.equal(dropArgs('f(a, b=1, c=2)', ['b', 'c']), 'f(a)');
    assert.equal(dropArgs('f(a, b=1, c=2, d=3)', ['b', 'c']), 'f(a, d=3)');
    assert.equal(dropArgs('f(\n    a,\n    b=1,  # note\n    c=2,\n)', ['b']), 'f(\n    a,\n    c=2,\n)');
    assert.equal(dropArgs('f(\n    a,\n    b=1,\n)', ['b']), 'f(\n    a,\n)');
    assert.equal(dropArgs('f(\n    a,\n    b=1\n)', ['b']), 'f(\n    a\n)');
    assert.equal(dropArgs('f(a, s="x, y)", b=g(1, 2))', ['b']), 'f(a, s="x, y)")');
  });
});

describe('fixes: source scanning', () => {
  const src = 'import torch\n\n\ndef f(x):\n    s = """\n  not code\n"""\n    if x:\n        y = (1,\n             2)\n    return y\n';

  it('nests logical lines by indentation, across brackets and multi-line strings', () => {
    const model = scanSource(src);
    const f = model.statements[1];
    assert.equal(statementText(model, f), 'def f(x):');
    assert.deepEqual(f.children.map((s) => s.firstLine), [4, 7, 10]);
    assert.equal(f.children[1].children[0].lastLine, 9);
    assert.ok(model.linesInString.has(5));
    assert.equal(statementText(model, statementAt(model, src.indexOf('2)'))!), 'y = (1,\n             2)');
  });

  it('finds the indentation unit and the import insertion point', () => {
    assert.equal(indentUnit(scanSource(src)), '    ');
    assert.equal(indentUnit(scanSource('if x:\n\ty = 1\n')), '\t');
    assert.equal(indentUnit(scanSource('if x:\n  y = 1\n')), '  ');
    const guarded = '"""doc"""\nimport os\ntry:\n    import te\nexcept ImportError:\n    te = None\nX = 1\nimport late\ndef f(): pass\nimport later\n';
    assert.equal(guarded.slice(afterImportsOffset(scanSource(guarded))), 'def f(): pass\nimport later\n');
    assert.equal(afterImportsOffset(scanSource('"""doc"""\nx = 1\n')), 10);
  });
});
