/**
 * Issue 22's check against reality: the model step speedup the analysis predicts (server/src/analysis/gain-layer.ts
 * predictModel, from the shipped H200 table) beside the one the A/B runs measured on the H200
 * (bench/results/h200/<date>-ab*, `bench/benchmark.py --mode ab`, eager: the user's own BF16 step against the converted
 * one). The models are the real public codebases of issue 21, kept in the git-ignored .realproj/<family>/orig/model.py
 * (never committed; .realproj/NOTES.md says where they come from); each run's width and depth are written into the
 * model's config defaults, as the A/B's workload built them (PL_WIDTH / PL_LAYERS).
 *
 *   npx tsx scripts/gain-vs-measured.ts [--markdown]
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { resolveSettings } from '../common/settings';
import { analyzeTree } from '../server/src/analysis';
import { predictModel } from '../server/src/analysis/gain-layer';
import { createPythonParser } from '../server/src/engine/parser';

const ROOT = join(__dirname, '..');
const RESULTS = join(ROOT, 'bench', 'results', 'h200');
/** Config fields of each family's model.py: width and depth. */
const FIELDS: Record<string, { width: string; layers: string }> = {
  nanogpt: { width: 'n_embd', layers: 'n_layer' },
  llama2c: { width: 'dim', layers: 'n_layers' },
};

interface Run { family: string; width: number; layers: number; tokens: number; measured: number; file: string }

/** tokens/s of each arm: from the JSON where it came back, else from the log's `[arm] N tokens/s` lines. */
function measuredRuns(): Run[] {
  const runs: Run[] = [];
  for (const dir of readdirSync(RESULTS).filter((d) => /-ab/.test(d)).sort()) {
    for (const name of readdirSync(join(RESULTS, dir))) {
      const m = /^ab-(\w+)-(\d+)x(\d+)-(\d+)x(\d+)-eager-log\.txt$/.exec(name);
      if (!m) continue;
      const [, family, layers, width, batch, seq] = m;
      const log = readFileSync(join(RESULTS, dir, name), 'utf8');
      const rate = (arm: string) => Number(new RegExp(`^\\[${arm}\\] (\\d+) tokens/s`, 'm').exec(log)?.[1]);
      const orig = rate('original');
      const conv = rate('converted');
      if (!(orig > 0 && conv > 0)) continue;
      runs.push({ family, width: +width, layers: +layers, tokens: +batch * +seq, measured: conv / orig, file: `${dir}/${name}` });
    }
  }
  return runs;
}

async function main(): Promise<void> {
  const markdown = process.argv.includes('--markdown');
  const parser = await createPythonParser();
  const rows: string[] = [];
  const errors: number[] = [];
  for (const run of measuredRuns()) {
    const src = join(ROOT, '.realproj', run.family, 'orig', 'model.py');
    const fields = FIELDS[run.family];
    if (!fields || !existsSync(src)) { rows.push(`${run.family} ${run.layers} x ${run.width}: no ${src} (read it as .realproj/NOTES.md says)`); continue; }
    let text = readFileSync(src, 'utf8');
    text = text.replace(new RegExp(`(\\n\\s+${fields.width}: int = )\\d+`), `$1${run.width}`).replace(new RegExp(`(\\n\\s+${fields.layers}: int = )\\d+`), `$1${run.layers}`);
    const tree = parser.parse(text)!;
    const settings = resolveSettings({ tokensPerStep: run.tokens });
    const p = predictModel(analyzeTree(tree, text), settings);
    tree.delete();
    if (!p) { rows.push(`${run.family} ${run.layers} x ${run.width}: no prediction`); continue; }
    const err = p.step.speedup / run.measured - 1;
    errors.push(Math.abs(err));
    const cells = [`${run.family}`, `${run.layers} x ${run.width}`, `${run.tokens}`, `${p.step.speedup.toFixed(3)}x${p.step.hostBound.fp8 ? ' (launch-bound)' : ''}`, `${run.measured.toFixed(3)}x`, `${(100 * err).toFixed(1)} %`, run.file];
    rows.push(markdown ? `| ${cells.join(' | ')} |` : cells.join('\t'));
  }

  if (markdown) console.log('| model | layers x width | tokens/step | predicted | measured | error | run |\n|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(r);
  const within = errors.filter((e) => e <= 0.1).length;
  console.log(`${markdown ? '\n' : ''}${within} of ${errors.length} within 10 %`);
}

main().catch((e) => { console.error(e); process.exit(1); });
