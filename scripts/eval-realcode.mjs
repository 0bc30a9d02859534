#!/usr/bin/env node
// Scores the BUILT analysis (out/cli.js) on real model files against an FP8 expert's labels, written before the
// tool's output was read: bench/realcode/labels.tsv (file, line, class, attribute, constructor, expected, note) for the
// files listed in bench/realcode/SOURCES.tsv, kept in a git-ignored folder (corpus-extra/ by default; never committed).
//
//   npm run eval:realcode [-- DIR] [--set heldout] [--no-convert] [--json]
//
// --set NAME scores another labelled set: bench/realcode/NAME/{labels,SOURCES}.tsv over corpus-NAME/ (the held-out
// set, `--set heldout`, is files nobody tuned the analysis on: measure on it, never fix towards a file of it).
//
// Per file and in total: convertible precision / recall (Linears, norms, both), lm-head and embedding recall by
// role, layers wrongly called an lm-head, and the share of the expert's Linears that "Convert all in this file" +
// "Insert FP8 fallback wrapper" (the editor's actions, run from source through tsx) turns into te.* / the factories.
// Labels: convert | keep:<role> (lm_head, embedding, classifier, router) | skip (with the reason) | either (not
// scored: an expert could go both ways). Each file is analysed on its own, as one project. Exits 0 without the folder.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const setAt = argv.indexOf('--set');
const set = setAt >= 0 ? argv[setAt + 1] : undefined;
if (setAt >= 0 && !/^[a-z0-9-]+$/.test(set ?? '')) {
  console.error('eval:realcode: --set needs a set name (a folder of bench/realcode/, e.g. heldout).');
  process.exit(2);
}
const labelDir = join(root, 'bench', 'realcode', ...(set ? [set] : []));
const dir = argv.find((a, i) => !a.startsWith('--') && (setAt < 0 || i !== setAt + 1)) ?? join(root, set ? `corpus-${set}` : 'corpus-extra');
const withConvert = !argv.includes('--no-convert');
const asJson = argv.includes('--json');
const cli = join(root, 'out', 'cli.js');

if (!existsSync(dir)) {
  console.log(`eval:realcode: ${dir} is absent (the real model files are never committed; see bench/realcode/SOURCES.tsv): skipped.`);
  process.exit(0);
}
if (!existsSync(cli)) {
  console.error('out/cli.js is missing: run `npm run build` first (npm run eval:realcode builds).');
  process.exit(2);
}

const tsv = (p) => {
  const [head, ...rows] = readFileSync(p, 'utf8').trim().split('\n').map((l) => l.split('\t'));
  return rows.map((r) => Object.fromEntries(head.map((h, i) => [h, r[i] ?? ''])));
};
const labels = tsv(join(labelDir, 'labels.tsv'));
const sources = tsv(join(labelDir, 'SOURCES.tsv'));
const isNorm = (l) => /Norm/i.test(l.constructor) || l.note.startsWith('norm');

function inspect(files) {
  const r = spawnSync(process.execPath, [cli, 'inspect', ...files, '--format', 'json', '--jobs', '1'], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0 && r.status !== 1) throw new Error(`inspect ${files.join(' ')}: exit ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout).files;
}

function convertAll(file) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(root, 'scripts', 'lib', 'convert-all.ts'), file], { encoding: 'utf8', cwd: root, maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`convert-all ${file}: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

const ratio = (a, b) => (b ? a / b : NaN);
const fmt = (x) => (Number.isNaN(x) ? '  -  ' : x.toFixed(3));
const blank = () => ({ labelled: 0, reported: 0, silent: [], tp: 0, fp: 0, fn: 0, heads: 0, headsHit: 0, embs: 0, embsHit: 0, wrongHeads: [], unlabelled: 0, big: 0, bigConverted: 0, missed: [], falsePos: [], roleMiss: [] });
const add = (t, s) => { for (const k of Object.keys(t)) t[k] = Array.isArray(t[k]) ? t[k].concat(s[k]) : t[k] + s[k]; };

/** The reason of the first facet that is not `ok` (what kept the layer from being convertible). */
const decidingReason = (l) => {
  const f = ['structure', 'role', 'shape'].map((k) => l.facets?.[k]).find((x) => x && x.state !== 'ok' && x.state !== 'guarded') ??
    ['structure', 'role', 'shape'].map((k) => l.facets?.[k]).find((x) => x && x.state !== 'ok');
  return `${f?.check ?? '?'}: ${(f?.reason ?? l.reasons[0] ?? '').slice(0, 160)}`;
};

/**
 * The layer a label names, among those built on its line (`norm_layer(d) if flag else nn.Identity()` builds two):
 * the one with the label's constructor, else the one of the label's kind (a norm, a Linear, an embedding), else the first.
 */
const NORM_KINDS = new Set(['layernorm', 'rmsnorm']);
function pickLayer(onLine, lab) {
  if (onLine.length < 2) return onLine[0];
  const want = isNorm(lab) ? (l) => NORM_KINDS.has(l.kind) : /Embedding/.test(lab.constructor) ? (l) => l.kind === 'embedding' : (l) => /linear/.test(l.kind);
  return onLine.find((l) => l.constructor === lab.constructor) ?? onLine.find(want) ?? onLine[0];
}

function scoreFile(name, layers, fileLabels) {
  const out = { linear: blank(), norm: blank() };
  // A layer a factory function builds is reported at the factory's call site; its label sits on the constructor
  // inside the factory (builtAt), which is where the conversion edits: index it there too.
  const byLine = new Map();
  for (const l of layers) {
    byLine.set(l.line, [...(byLine.get(l.line) ?? []), l]);
    if (l.builtAt && l.builtAt.line !== l.line) byLine.set(l.builtAt.line, [...(byLine.get(l.builtAt.line) ?? []), l]);
  }
  const labelled = new Set();
  for (const lab of fileLabels) {
    const s = isNorm(lab) ? out.norm : out.linear;
    const layer = pickLayer(byLine.get(Number(lab.line)) ?? [], lab);
    if (layer) labelled.add(layer);
    // Every labelled construction builds parameters: the tool should list it (with whatever verdict), never stay silent.
    s.labelled++;
    if (layer) s.reported++; else s.silent.push(`${name}:${lab.line} ${lab.class}.${lab.attribute} (${lab.constructor}, ${lab.expected})`);
    const where = `${name}:${lab.line} ${lab.class}.${lab.attribute}`;
    const conv = layer?.convertible === true;
    if (lab.expected === 'convert') {
      if (conv) s.tp++; else { s.fn++; s.missed.push(`${where} (${layer ? decidingReason(layer) : 'not found'})`); }
    } else if (lab.expected !== 'either' && conv) { s.fp++; s.falsePos.push(`${where} (${lab.expected})`); }
    if (lab.expected === 'keep:lm_head') { s.heads++; if (layer?.role === 'lm_head') s.headsHit++; else s.roleMiss.push(`${where} lm_head as ${layer?.role ?? 'not found'}`); }
    if (lab.expected === 'keep:embedding') { s.embs++; if (layer?.role === 'embedding') s.embsHit++; else s.roleMiss.push(`${where} embedding as ${layer?.role ?? 'not found'}`); }
    if (layer?.role === 'lm_head' && lab.expected !== 'keep:lm_head') s.wrongHeads.push(`${where} (${lab.expected})`);
  }
  for (const l of layers) {
    if (labelled.has(l)) continue;
    out.linear.unlabelled++;
    if (l.role === 'lm_head') out.linear.wrongHeads.push(`${name}:${l.line} ${l.ownerClass ?? ''}.${l.name} (unlabelled)`);
  }
  return out;
}

/**
 * The expert's convert-labelled Linears that "convert all" turned into te.* or a factory call. The conversions keep
 * every line where it was; the wrapper adds `shift` lines above the first class, so a label's line moves by `shift`.
 * A factory call is listed as both of its alternatives (te.* and torch.nn): one te.* alternative is enough.
 * A label also counts where a te.* layer of its class carries its attribute's name.
 */
function convertCoverage(fileLabels, convertedLayers, shift) {
  const want = fileLabels.filter((l) => l.expected === 'convert' && !isNorm(l));
  const teLayers = convertedLayers.filter((l) => l.isTe || /^(fp8_|te\.)/.test(l.constructor));
  const te = new Set(teLayers.map((l) => l.line));
  // Also by owner class and attribute: a conversion that joins a call's lines below a label moves it by less than the
  // whole file's shift (fla's GLA layer: its five converted projections were counted as three).
  const attrOf = (l) => (l.name ?? '').replace(/^self\./, '').replace(/\[.*$/, '');
  const byName = new Set(teLayers.map((l) => `${l.ownerClass ?? ''}.${attrOf(l)}`));
  return { big: want.length, bigConverted: want.filter((l) => te.has(Number(l.line) + shift) || byName.has(`${l.class}.${l.attribute}`)).length };
}

const files = [...new Set(labels.map((l) => l.file))].filter((f) => existsSync(join(dir, f)));
const missingFiles = sources.map((s) => s.file).filter((f) => !existsSync(join(dir, f)));
const total = { linear: blank(), norm: blank() };
const perFile = [];
const tmp = mkdtempSync(join(tmpdir(), 'pl-realcode-'));
try {
  for (const f of files) {
    const path = join(dir, f);
    const [res] = inspect([path]);
    const fileLabels = labels.filter((l) => l.file === f);
    const s = scoreFile(f, res.layers, fileLabels);
    let titles = [];
    if (withConvert) {
      const conv = convertAll(path);
      titles = conv.titles;
      const cpath = join(tmp, f);
      writeFileSync(cpath, conv.text);
      const shift = conv.text.split('\n').length - readFileSync(path, 'utf8').split('\n').length;
      Object.assign(s.linear, convertCoverage(fileLabels, inspect([cpath])[0].layers, shift));
    }
    add(total.linear, s.linear);
    add(total.norm, s.norm);
    perFile.push({ file: f, ...s, titles });
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

const line = (label, s) => {
  const p = ratio(s.tp, s.tp + s.fp), r = ratio(s.tp, s.tp + s.fn);
  const roles = ratio(s.headsHit + s.embsHit, s.heads + s.embs);
  return `${label.padEnd(30)} P ${fmt(p)}  R ${fmt(r)}  (tp ${s.tp} fp ${s.fp} fn ${s.fn})  heads ${s.headsHit}/${s.heads}  emb ${s.embsHit}/${s.embs}  role ${fmt(roles)}  wrong-heads ${s.wrongHeads.length}` +
    `  reported ${s.reported}/${s.labelled}` + (withConvert && s.big ? `  convert-all ${s.bigConverted}/${s.big}` : '');
};
const both = (a, b) => { const t = blank(); add(t, a); add(t, b); return t; };

if (asJson) {
  console.log(JSON.stringify({ files: perFile, total }, null, 1));
  process.exit(0);
}
console.log(`Real model files in ${dir}: ${files.length} scored${missingFiles.length ? `, absent: ${missingFiles.join(', ')}` : ''}`);
for (const r of perFile) console.log(line(r.file, both(r.linear, r.norm)));
console.log('');
console.log(line('TOTAL linear', total.linear));
console.log(line('TOTAL norm', total.norm));
console.log(line('TOTAL linear + norm', both(total.linear, total.norm)));
const all = both(total.linear, total.norm);
const show = (title, xs) => { if (xs.length) console.log(`\n${title} (${xs.length}):\n  ${xs.join('\n  ')}`); };
show('Missed (expert converts, tool does not)', all.missed);
show('Wrongly convertible', all.falsePos);
show('Role misses', all.roleMiss);
show('Wrongly called an lm-head', all.wrongHeads);
show('Labelled constructions the tool does not list', all.silent);
console.log(`\nLayers the tool lists that carry no label (not scored): ${total.linear.unlabelled}`);
