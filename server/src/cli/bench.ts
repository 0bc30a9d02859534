/**
 * The hidden `precision-lens __bench` subcommand: timings of the BUILT analysis for scripts/bench-analysis.mjs, so the
 * figures measure what ships (the esbuild bundle and its WASM) rather than the TypeScript sources.
 *
 *   __bench full FILE [--runs N] [--warmup N]          parse + analyzeTree + rules, from scratch, N times
 *   __bench incremental FILE [--edits N] [--seed S]    one-character edits at seeded random places through
 *                                                      editTree + reparse + analyzeParsed with the document's
 *                                                      AnalysisCache (as the server does); full re-parses as baseline
 *   __bench parse FILE...                              each file parsed once in this fresh process, as `check`
 *                                                      does (cold WASM included): the parse-only floor of `check`
 * Prints one JSON object with the raw samples in milliseconds.
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { DEFAULT_SETTINGS } from '../../../common/settings';
import { AnalysisCache, analyzeTree } from '../analysis';
import { analyzeParsed, workspaceFactsOf } from '../engine/engine';
import { editTree, lineStartsOf, reparse } from '../lsp/incremental';
import { createPythonParser } from '../engine/parser';
import { runRules } from '../rules';
import { UsageError } from './args';
import { prng } from './mutate';

function flag(args: readonly string[], name: string, fallback: number): number {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const n = Number(args[i + 1]);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`__bench: ${name} needs a number`);
  return n;
}

export async function runBench(args: readonly string[], write: (s: string) => void): Promise<number> {
  const [mode, file] = args;
  if (!mode || !file || (mode !== 'full' && mode !== 'incremental' && mode !== 'parse')) throw new UsageError('__bench full|incremental|parse FILE [...]');
  if (mode === 'parse') {
    const t0 = performance.now();
    const parser = await createPythonParser();
    const initMs = performance.now() - t0;
    let parseMs = 0;
    let lines = 0;
    for (const f of args.slice(1)) {
      const text = readFileSync(f, 'utf8');
      lines += lineStartsOf(text).length;
      const a = performance.now();
      parser.parse(text)?.delete();
      parseMs += performance.now() - a;
    }
    write(JSON.stringify({ mode, files: args.length - 1, lines, initMs, parseMs }) + '\n');
    return 0;
  }
  const text = readFileSync(file, 'utf8');
  const t0 = performance.now();
  const parser = await createPythonParser();
  const initMs = performance.now() - t0;
  const settings = DEFAULT_SETTINGS;
  const lines = lineStartsOf(text).length;

  if (mode === 'full') {
    const runs = flag(args, '--runs', 15);
    const warmup = flag(args, '--warmup', 3);
    const parseMs: number[] = [];
    const analyzeMs: number[] = [];
    const rulesMs: number[] = [];
    const totalMs: number[] = [];
    let findings = 0;
    let layers = 0;
    for (let i = 0; i < warmup + runs; i++) {
      const a = performance.now();
      const tree = parser.parse(text)!;
      const b = performance.now();
      const ir = analyzeTree(tree, text);
      const c = performance.now();
      const workspace = workspaceFactsOf([ir]);
      const found = runRules({ ir, text, settings, workspace });
      const d = performance.now();
      tree.delete();
      if (i >= warmup) {
        parseMs.push(b - a); analyzeMs.push(c - b); rulesMs.push(d - c); totalMs.push(d - a);
        findings = found.length; layers = ir.layers.length;
      }
    }
    write(JSON.stringify({ mode, file, lines, initMs, runs, warmup, layers, findings, parseMs, analyzeMs, rulesMs, totalMs }) + '\n');
    return 0;
  }

  const edits = flag(args, '--edits', 200);
  const seed = flag(args, '--seed', 7);
  const random = prng(seed);
  const alphabet = 'abcxyz_019 .,(:=';
  let current = text;
  let lineStarts = lineStartsOf(current);
  let tree = parser.parse(current)!;
  const workspace = workspaceFactsOf([analyzeTree(tree, current)]);
  const incrementalMs: number[] = [];
  const reparseOnlyMs: number[] = [];
  // The per-document memo the language server keeps (session.ts).
  const cache = new AnalysisCache();
  // Warm-up: the first parses fill the WASM heap and JIT the analysis.
  for (let i = 0; i < 5; i++) analyzeParsed(tree, current, settings, workspace, cache);
  for (let i = 0; i < edits; i++) {
    // Type one character, then delete it again: every sample is a one-character edit and the file stays realistic.
    const at = Math.floor(random() * current.length);
    const ch = alphabet[Math.floor(random() * alphabet.length)];
    for (const change of [{ startOffset: at, endOffset: at, text: ch }, { startOffset: at, endOffset: at + 1, text: '' }]) {
      const a = performance.now();
      const next = editTree(tree, current, lineStarts, change);
      const nextStarts = lineStartsOf(next);
      const b = performance.now();
      const reparsed = reparse(parser, next, tree)!;
      const c = performance.now();
      analyzeParsed(reparsed, next, settings, workspace, cache);
      const d = performance.now();
      incrementalMs.push(d - a);
      reparseOnlyMs.push(c - b);
      tree = reparsed;
      current = next;
      lineStarts = nextStarts;
    }
  }
  // The floor of the whole-file passes: re-analysis of the unchanged text, every statement reused.
  const sameTextMs: number[] = [];
  for (let i = 0; i < Math.max(20, Math.min(200, edits)); i++) {
    const a = performance.now();
    analyzeParsed(tree, current, settings, workspace, cache);
    sameTextMs.push(performance.now() - a);
  }
  const fullParseMs: number[] = [];
  const fullAnalysisMs: number[] = [];
  for (let i = 0; i < Math.max(10, Math.min(50, edits / 4)); i++) {
    const a = performance.now();
    const fresh = parser.parse(current)!;
    const b = performance.now();
    analyzeParsed(fresh, current, settings, workspace);
    const c = performance.now();
    fresh.delete();
    fullParseMs.push(b - a);
    fullAnalysisMs.push(c - a);
  }
  tree.delete();
  write(JSON.stringify({ mode, file, lines, initMs, edits: incrementalMs.length, seed, incrementalMs, reparseOnlyMs, sameTextMs, fullParseMs, fullAnalysisMs }) + '\n');
  return 0;
}
