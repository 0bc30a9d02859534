/**
 * Converts a model file the way SCENARIOS.md journey 2 does, through the real fix functions: "Convert all eligible
 * layers in this file", then "Insert FP8 fallback wrapper", then "Wrap the training step in FP8 autocast", re-analysing
 * the file between steps as the editor would.
 *
 *   npx tsx test/python/convert-example.ts [input.py] [output.py]
 *
 * Defaults: test/fixtures/fixes/exec_gpt.py, written to stdout. The output runs without TE (BF16 fallback) and, on a
 * GPU with Transformer Engine, in FP8: copy it to the GPU machine and run it there with python.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_SETTINGS, type PrecisionLensSettings } from '../../common/settings';
import { analyzeTree } from '../../server/src/analysis';
import { applyEdits, sourceFixes, type Fix } from '../../server/src/fixes';
import { createPythonParser, type Parser } from '../../server/src/engine/parser';

export const EXAMPLE_INPUT = join(__dirname, '..', 'fixtures', 'fixes', 'exec_gpt.py');

function step(parser: Parser, text: string, settings: PrecisionLensSettings, pick: (f: Fix) => boolean): { text: string; fix?: Fix } {
  const tree = parser.parse(text);
  if (!tree) throw new Error('parse failed');
  try {
    const fix = sourceFixes(text, analyzeTree(tree, text), settings).find(pick);
    return fix ? { text: applyEdits(text, fix.edits), fix } : { text };
  } finally {
    tree.delete();
  }
}

/** The three journey-2 actions applied in order; returns the converted source and the titles of the fixes applied. */
export async function convertExample(source: string, settings: PrecisionLensSettings = { ...DEFAULT_SETTINGS, convertLosingLayers: true }): Promise<{ text: string; applied: string[] }> {
  const parser = await createPythonParser();
  const applied: string[] = [];
  let text = source;
  for (const pick of [
    (f: Fix) => f.id === 'convert-all:file',
    (f: Fix) => f.id === 'insert-wrapper',
    (f: Fix) => f.id === 'wrap-training-step',
  ]) {
    const r = step(parser, text, settings, pick);
    text = r.text;
    if (r.fix) applied.push(r.fix.title);
  }
  parser.delete();
  return { text, applied };
}

if (require.main === module) {
  const [input = EXAMPLE_INPUT, output] = process.argv.slice(2);
  convertExample(readFileSync(input, 'utf8')).then(({ text, applied }) => {
    for (const title of applied) process.stderr.write(`applied: ${title}\n`);
    if (output) writeFileSync(output, text); else process.stdout.write(text);
  }, (err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : err}\n`);
    process.exit(1);
  });
}
