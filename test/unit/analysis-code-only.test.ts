/**
 * analysis/spans.ts codeOnly: comments and string contents blanked, the text's length and newlines kept, so positions
 * found in it are positions in the text (fusion's and the weight-use checks' reading of a class).
 */
import * as assert from 'node:assert/strict';
import { codeOnly } from '../../server/src/analysis/spans';

/** `line` with [from, to) turned to blanks. */
const blanks = (line: string, from: number, to = line.length): string => line.slice(0, from) + ' '.repeat(to - from) + line.slice(to);

describe('analysis: codeOnly', () => {
  it('blanks comments and string contents, keeps quotes, newlines, code and the length', () => {
    const src = [
      'class A:',
      '    """Stores `self.linear.weight`',
      '    across lines."""',
      '    def f(self, x):  # self.linear.weight: (384, 128)',
      "        s = 'self.w' + \"it's\"",
      '        return self.linear(x)',
    ];
    const text = src.join('\n');
    const out = codeOnly(text);
    assert.equal(out.length, text.length);
    assert.doesNotMatch(out, /weight/);
    const lines = out.split('\n');
    assert.equal(lines[0], src[0]);
    assert.equal(lines[1], blanks(src[1], 7));
    assert.equal(lines[2], blanks(src[2], 0, src[2].length - 3));
    assert.equal(lines[3], blanks(src[3], src[3].indexOf('#')));
    assert.equal(lines[4], "        s = '      ' + \"    \"");
    assert.equal(lines[5], src[5]);
  });

  it('escapes, an unterminated string, a backslash at the very end: same length, nothing read past the text', () => {
    for (const text of ['x = "a\\"b" + c', "x = 'open\ny = 1", 'x = "end\\', '# only a comment', 'no quotes at all', '']) {
      assert.equal(codeOnly(text).length, text.length, JSON.stringify(text));
    }
    assert.equal(codeOnly('x = "a\\"b" + c'), 'x = "    " + c');
    assert.equal(codeOnly("x = 'open\ny = 1"), "x = '    \ny = 1");
    assert.equal(codeOnly('no quotes at all'), 'no quotes at all');
  });
});
