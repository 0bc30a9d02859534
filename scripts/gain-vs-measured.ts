/**
 * Issue 22's check against reality: the model step speedup the analysis predicts (server/src/analysis/gain-layer.ts
 * predictModel, from the shipped H200 table) beside the one the A/B runs measured on the H200
 * (bench/results/h200/<date>-ab*, `bench/benchmark.py --mode ab`, eager: the user's own BF16 step against the converted
 * one). The models are the real public codebases of issue 21, kept in the git-ignored .realproj/<family>/orig/model.py
 * (never committed; .realproj/NOTES.md says where they come from); each run's width and depth are written into the
 * model's config defaults, as the A/B's workload built them (PL_WIDTH / PL_LAYERS). Each run is predicted as it ran:
 * its recipe (te-delayed or te-current table) and whether its norms converted (see measuredRuns). Beside the adopted
 * prediction (one max(GPU, host) over the step) the per-phase overlap rule, which was tried and not adopted (gain.ts
 * OverlapRule, docs/gain.md). Then torchao: the compiled A/B runs (`ab-...-compiled-log.txt`) measured torchao's
 * tensorwise recipe on the original (`torchao-original`) against the compiled original, which the table's compiled
 * torchao rows predict (against compiled BF16) once gain_data.py --compiled merged them; until then "not measured".
 *
 *   npx tsx scripts/gain-vs-measured.ts [--markdown]
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { resolveSettings } from '../common/settings';
import { analyzeTree } from '../server/src/analysis';
import { phaseStepMs } from '../server/src/analysis/gain';
import { predictModel, predictModelFor } from '../server/src/analysis/gain-layer';
import { createPythonParser } from '../server/src/engine/parser';

const ROOT = join(__dirname, '..');
const RESULTS = join(ROOT, 'bench', 'results', 'h200');
/** Config fields of each family's model.py: width and depth. */
const FIELDS: Record<string, { width: string; layers: string }> = {
  nanogpt: { width: 'n_embd', layers: 'n_layer' },
  llama2c: { width: 'dim', layers: 'n_layers' },
};

interface Run {
  family: string;
  /** The rest of the run's name (`-ln`: nanoGPT's LayerNorms converted too, `-cs`: current scaling, `-lin`: Linears only), '' for none. */
  variant: string;
  width: number; layers: number; tokens: number; measured: number; file: string;
  /** The recipe the converted arm ran, from its log line `[converted] fp8_fallback: Running in FP8 mode ..., recipe X`. */
  recipe: 'DelayedScaling' | 'Float8CurrentScaling';
  /** TE norm modules that ran in the converted arm (the summary JSON's ab.fp8_gemms.norm_modules); undefined: not reported. */
  normModules: number | undefined;
}

/**
 * Every eager A/B run (`ab-<family>[-variant]-<L>x<W>-<B>x<S>-eager-log.txt`) and every loss run (`loss-...-eager-<steps>-log.txt`,
 * which measure the speed too) under bench/results/h200/*-ab* and *-loss*: tokens/s of each arm from the log's
 * `[arm] N tokens/s` lines, the recipe from the converted arm's log line, the norms from the -out.txt summary.
 */
function measuredRuns(): Run[] {
  const runs: Run[] = [];
  for (const dir of readdirSync(RESULTS).filter((d) => /-(ab|loss)/.test(d)).sort()) {
    for (const name of readdirSync(join(RESULTS, dir)).sort()) {
      const m = /^(?:ab|loss)-([a-z0-9]+)((?:-[a-z]+)*)-(\d+)x(\d+)-(\d+)x(\d+)-eager(?:-\d+)?-log\.txt$/.exec(name);
      if (!m) continue;
      const [, family, variant, layers, width, batch, seq] = m;
      const log = readFileSync(join(RESULTS, dir, name), 'utf8');
      const rate = (arm: string) => Number(new RegExp(`^\\[${arm}\\] (\\d+) tokens/s`, 'm').exec(log)?.[1]);
      const orig = rate('original');
      const conv = rate('converted');
      if (!(orig > 0 && conv > 0)) continue;
      const recipeLine = /^\[converted\] fp8_fallback: Running in FP8 mode.*recipe (\w+)/m.exec(log)?.[1] ?? 'DelayedScaling';
      const out = join(RESULTS, dir, name.replace(/-log\.txt$/, '-out.txt'));
      const nm = existsSync(out) ? /"norm_modules":\s*(\d+)/.exec(readFileSync(out, 'utf8'))?.[1] : undefined;
      runs.push({
        family, variant: variant.replace(/^-/, ''), width: +width, layers: +layers, tokens: +batch * +seq, measured: conv / orig, file: `${dir}/${name}`,
        recipe: recipeLine === 'Float8CurrentScaling' ? 'Float8CurrentScaling' : 'DelayedScaling', normModules: nm === undefined ? undefined : +nm,
      });
    }
  }
  return runs;
}

/** The compiled A/B runs: torchao on the original (compiled) over the original (compiled), tokens/s. */
function torchaoRuns(): { family: string; width: number; layers: number; tokens: number; measured: number; file: string }[] {
  const runs = [];
  for (const dir of readdirSync(RESULTS).filter((d) => /-ab/.test(d)).sort()) {
    for (const name of readdirSync(join(RESULTS, dir)).sort()) {
      const m = /^ab-([a-z0-9]+)-(\d+)x(\d+)-(\d+)x(\d+)-compiled-log\.txt$/.exec(name);
      if (!m) continue;
      const log = readFileSync(join(RESULTS, dir, name), 'utf8');
      const rate = (arm: string) => Number(new RegExp(`^\\[${arm}\\] (\\d+) tokens/s`, 'm').exec(log)?.[1]);
      const orig = rate('original');
      const ao = rate('torchao-original');
      if (!(orig > 0 && ao > 0)) continue;
      runs.push({ family: m[1], layers: +m[2], width: +m[3], tokens: +m[4] * +m[5], measured: ao / orig, file: `${dir}/${name}` });
    }
  }
  return runs;
}

async function main(): Promise<void> {
  const markdown = process.argv.includes('--markdown');
  const parser = await createPythonParser();
  const rows: string[] = [];
  const errors: { err: number; width: number }[] = [];
  const phaseErrors: { err: number; width: number }[] = [];
  for (const run of measuredRuns()) {
    const src = join(ROOT, '.realproj', run.family, 'orig', 'model.py');
    const fields = FIELDS[run.family];
    const label = `${run.family}${run.variant ? `-${run.variant}` : ''}`;
    if (!fields || !existsSync(src)) { rows.push(`${label} ${run.layers} x ${run.width}: no ${src} (read it as .realproj/NOTES.md says)`); continue; }
    let text = readFileSync(src, 'utf8');
    text = text.replace(new RegExp(`(\\n\\s+${fields.width}: int = )\\d+`), `$1${run.width}`).replace(new RegExp(`(\\n\\s+${fields.layers}: int = )\\d+`), `$1${run.layers}`);
    const tree = parser.parse(text)!;
    // Predicted as it ran: the recipe of its log (te.recipe picks the te-current table, gain-layer.ts gainBackend).
    const settings = resolveSettings({ tokensPerStep: run.tokens, te: { recipe: run.recipe } });
    const ir = analyzeTree(tree, text);
    // A converted copy that ran no TE norm (norm_modules 0: the runs before nanoGPT's LayerNorm(bias=config.bias)
    // converted, and the Linears-only variant) kept its norms in torch: its norms are marked not convertible here, so
    // predictModel keeps them in BF16 in both arms.
    const normsKept = run.normModules === 0;
    if (normsKept) for (const l of ir.layers) if (l.kind === 'layernorm' || l.kind === 'rmsnorm') { l.convertible = false; l.viaFallback = false; }
    const p = predictModel(ir, settings);
    tree.delete();
    if (!p) { rows.push(`${label} ${run.layers} x ${run.width}: no prediction`); continue; }
    const err = p.step.speedup / run.measured - 1;
    errors.push({ err: Math.abs(err), width: run.width });
    // The per-phase overlap rule (gain.ts OverlapRule 'phases'), tried and not adopted: beside the adopted one.
    const ph = p.step.phases;
    const phase = ph ? phaseStepMs(ph, 'bf16', 'phases') / phaseStepMs(ph, 'fp8', 'phases') : p.step.speedup;
    const phaseErr = phase / run.measured - 1;
    phaseErrors.push({ err: Math.abs(phaseErr), width: run.width });
    const pct = (e: number) => `${e >= 0 ? '+' : ''}${(100 * e).toFixed(1)} %`;
    const how = `${run.recipe === 'Float8CurrentScaling' ? 'current' : 'delayed'}, norms ${normsKept ? 'kept' : 'TE'}`;
    const cells = [label, `${run.layers} x ${run.width}`, `${run.tokens}`, how, `${p.step.speedup.toFixed(3)}x${p.step.hostBound.fp8 ? ' (launch-bound)' : ''}`, `${run.measured.toFixed(3)}x`, pct(err), `${phase.toFixed(3)}x (${pct(phaseErr)})`, run.file];
    rows.push(markdown ? `| ${cells.join(' | ')} |` : cells.join('\t'));
  }

  if (markdown) console.log('| model | layers x width | tokens/step | recipe, norms | predicted | measured | error | per-phase rule (not adopted) | run |\n|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(r);
  const summary = (es: { err: number; width: number }[]): string => {
    const within = es.filter((e) => e.err <= 0.1);
    const widths = (xs: { width: number }[]) => [...new Set(xs.map((e) => e.width))].sort((a, b) => a - b);
    const all = widths(es).filter((w) => es.every((e) => e.width !== w || e.err <= 0.1));
    const mean = es.reduce((a, e) => a + e.err, 0) / (es.length || 1);
    return `${within.length} of ${es.length} runs within 10 % (mean |error| ${(100 * mean).toFixed(1)} %); widths with a run within 10 %: ${widths(within).join(', ')} (${widths(within).length} of ${widths(es).length}); every run within 10 %: ${all.join(', ') || 'none'}`;
  };
  console.log(`${markdown ? '\n' : ''}adopted (one max over the step): ${summary(errors)}`);
  console.log(`${markdown ? '\n' : ''}per-phase rule: ${summary(phaseErrors)}`);

  // torchao (tensorwise, compiled) on the original model, against the compiled original.
  const aoRows: string[] = [];
  for (const run of torchaoRuns()) {
    const src = join(ROOT, '.realproj', run.family, 'orig', 'model.py');
    const fields = FIELDS[run.family];
    if (!fields || !existsSync(src)) { aoRows.push(`${run.family} ${run.layers} x ${run.width}: no ${src}`); continue; }
    const text = readFileSync(src, 'utf8')
      .replace(new RegExp(`(\\n\\s+${fields.width}: int = )\\d+`), `$1${run.width}`).replace(new RegExp(`(\\n\\s+${fields.layers}: int = )\\d+`), `$1${run.layers}`);
    const tree = parser.parse(text)!;
    const p = predictModelFor(analyzeTree(tree, text), resolveSettings({ tokensPerStep: run.tokens }), 'torchao-original');
    tree.delete();
    const predicted = !p ? 'no prediction' : p.measured ? `${p.prediction.step.speedup.toFixed(3)}x` : p.reason;
    const err = p?.measured ? `${((p.prediction.step.speedup / run.measured - 1) * 100).toFixed(1)} %` : '';
    const cells = [run.family, `${run.layers} x ${run.width}`, `${run.tokens}`, `${run.measured.toFixed(3)}x`, predicted, err, run.file];
    aoRows.push(markdown ? `| ${cells.join(' | ')} |` : cells.join('\t'));
  }
  if (aoRows.length) {
    console.log(`${markdown ? '\n' : '\n'}torchao tensorwise on the original, compiled, against the compiled original (the table's compiled rows):`);
    if (markdown) console.log('| model | layers x width | tokens/step | measured | predicted | error | run |\n|---|---|---|---|---|---|---|');
    for (const r of aoRows) console.log(r);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
