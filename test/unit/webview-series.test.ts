/**
 * The benchmark view's chart colours: every arm of an A/B run (up to five: the loss check with the BF16 arm again and
 * from rounded weights, or the torchao peer) has a colour of its own, defined in webview.css.
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { seriesClass } from '../../client/src/sidebar/webview/charts';
import { AB_ARMS } from '../../common/bench-events';

describe('chart series colours', () => {
  const css = readFileSync(join(__dirname, '..', '..', 'client', 'src', 'sidebar', 'webview', 'webview.css'), 'utf8');

  it('gives every A/B arm its own colour, whatever its position in the run', () => {
    const ids = AB_ARMS.map((a) => a.id);
    assert.ok(ids.includes('original-rounded') && ids.includes('original-repeat'));
    const classes = ids.map((id, i) => seriesClass(id, i));
    assert.equal(new Set(classes).size, ids.length, classes.join(', '));
    // The loss check's fourth arm at index 3 does not wrap onto the first arm's colour.
    assert.notEqual(seriesClass('original-rounded', 3), seriesClass('original', 0));
    for (const c of classes) assert.match(css, new RegExp(`\\.${c} \\{\\n  --series: var\\(--vscode-charts-[a-z]+\\);`), `${c} is defined`);
  });

  it('keeps the presets\' fixed colours and the spare ones in order for other backends', () => {
    assert.deepEqual(['bf16', 'te', 'torch-fp8'].map((b) => seriesClass(b, 5)), ['series-bf16', 'series-te', 'series-torch-fp8']);
    assert.deepEqual(['torchao', 'modelopt', 'x', 'y'].map((b, i) => seriesClass(b, i + 3)), ['series-other-0', 'series-other-1', 'series-other-2', 'series-other-0']);
  });
});
