/**
 * Writes the originals and the converted copies ("Convert all" + wrapper, as the editor does) of the fixtures whose
 * generated code is checked on real Transformer Engine by bench/tools/te_generated_check.py:
 *   npx tsx scripts/gen-te-check.ts DIR      (then, on the GPU: python3 bench/tools/te_generated_check.py DIR)
 */
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { convertExample } from '../test/python/convert-example';
import { settingsWith } from '../test/unit/fixes-support';

const FIXTURES = join(__dirname, '..', 'test', 'fixtures', 'fixes');
const CASES: [string, string][] = [['norm', 'norm_weight_name.py'], ['conv1d', 'conv1d_gpt2.py'], ['fuse', 'fuse_blocks.py']];

async function main(dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  cpSync(join(FIXTURES, 'transformers_stub'), join(dir, 'transformers_stub'), { recursive: true });
  for (const [name, file] of CASES) {
    const source = readFileSync(join(FIXTURES, file), 'utf8');
    const { text, applied } = await convertExample(source, { ...settingsWith({}), convertLosingLayers: true });
    writeFileSync(join(dir, `original_${name}.py`), source);
    writeFileSync(join(dir, `converted_${name}.py`), text);
    console.log(`${name}: ${applied.join('; ')}`);
  }
}

const dir = process.argv[2];
if (!dir) {
  console.error('usage: npx tsx scripts/gen-te-check.ts DIR');
  process.exit(2);
}
main(dir).catch((e) => { console.error(e); process.exit(1); });
