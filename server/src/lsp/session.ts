/**
 * Per-document analysis state for the language server: text, version, the tree-sitter tree (edited incrementally)
 * and the last analysis. Knows nothing about the LSP connection, so it is tested directly.
 *
 * The model IR of a document depends on its text only; its findings depend on the IR, the settings and the workspace
 * facts. The two are kept apart: a change of settings or of the workspace facts re-runs only the rules (and only on
 * documents whose inputs changed), never the parse or the IR.
 */
import type { PrecisionLensSettings } from '../../../common/settings';
import { AnalysisCache } from '../analysis/index';
import { fileURLToPath } from 'node:url';
import { dirname, relative } from 'node:path';
import { analyzeParsed, emptyIR, fileFactsOf, findingsOf, skipReason, type DocumentAnalysis } from '../engine/engine';
import { dimsForFile } from '../workspace/dims';
import { sitesForFile } from '../workspace/sites';
import { editTree, lineStartsOf, type TextChange } from './incremental';
import { lineStartsAfter, pythonSource } from '../engine/lines';
import { isWasmTrap, ParserTrap, type PythonParser, type Tree } from '../engine/parser';
import type { WorkspaceFacts } from '../rules/types';

export interface DocumentState {
  uri: string;
  version: number;
  text: string;
  lineStarts: number[];
  /** The tree for `text`, possibly edited since its last parse (then `stale`). */
  tree: Tree | null;
  stale: boolean;
  /** Per-statement memo of the analysis, so re-analysis after an edit redoes only the edited statements. */
  cache: AnalysisCache;
  analysis?: DocumentAnalysis & { version: number; skipped?: string; ms: number };
  /** The IR's version and the settings + facts the findings were computed with (what decides re-running the rules). */
  irVersion?: number;
  irKey?: string;
  rulesKey?: string;
  /** Set when the editor sent a change that cannot be applied exactly: the text is no longer the editor's. */
  desynced?: string;
  /** What the server last published for this document (so that an unchanged result is not published again). */
  published?: { version: number; diagnostics: readonly unknown[] };
  /** What its last IR contributes to the workspace facts (engine.fileFactsOf), as a string. */
  factsKey?: string;
}

/**
 * Whether these diagnostics differ from what was last published for the document, recording them if so. Another
 * version always does (the editor ties diagnostics to a version); the same version is compared by content, serialised
 * only then (a keystroke does not pay for a serialisation the connection makes anyway).
 */
export function changedSincePublished(state: DocumentState, version: number, diagnostics: readonly unknown[]): boolean {
  const last = state.published;
  if (last && last.version === version && JSON.stringify(last.diagnostics) === JSON.stringify(diagnostics)) return false;
  state.published = { version, diagnostics };
  return true;
}

/** A text change whose offsets come from LSP positions, with whether those positions were valid. */
export type SessionChange = (TextChange & { invalid?: string }) | { text: string };

export class AnalysisSession {
  private readonly docs = new Map<string, DocumentState>();
  /**
   * Bumped whenever what the open documents contribute to the workspace facts may have changed: a document opened or
   * closed, or an analysis whose file facts differ from the document's previous ones (most edits change none).
   */
  factsGeneration = 0;

  /** The workspace's Python files (from the workspace scan): their calls of a document's classes give sizes. */
  workspaceFiles: readonly string[] = [];

  constructor(private readonly parser: PythonParser) {}

  get size(): number {
    return this.docs.size;
  }

  get(uri: string): DocumentState | undefined {
    return this.docs.get(uri);
  }

  all(): IterableIterator<DocumentState> {
    return this.docs.values();
  }

  open(uri: string, text: string, version: number): DocumentState {
    this.close(uri);
    const state: DocumentState = { uri, version, text, lineStarts: lineStartsOf(text), tree: null, stale: true, cache: new AnalysisCache() };
    this.docs.set(uri, state);
    this.factsGeneration++;
    return state;
  }

  /**
   * Applies LSP content changes in order. Each range change edits the tree (cheap) so the next parse is
   * incremental; a whole-document change drops the tree and ends a desync. A change with an invalid range (reversed,
   * negative, past the end) is not guessed at: the document is marked desynced until the editor sends the whole text.
   */
  change(uri: string, changes: readonly SessionChange[], version: number): DocumentState | undefined {
    const state = this.docs.get(uri);
    if (!state) return undefined;
    for (const change of changes) {
      if (!('startOffset' in change)) {
        state.text = change.text;
        this.dropTree(state);
        state.desynced = undefined;
      } else if (state.desynced) {
        continue;
      } else if (change.invalid) {
        state.desynced = change.invalid;
        this.dropTree(state);
        state.cache.clear();
        continue;
      } else if (!state.text.includes('\r') && !change.text.includes('\r')) {
        if (state.tree && this.parser.owns(state.tree)) state.text = editTree(state.tree, state.text, state.lineStarts, change);
        else {
          state.text = state.text.slice(0, change.startOffset) + change.text + state.text.slice(change.endOffset);
          this.dropTree(state);
        }
        // the line table is updated around the change, not rebuilt from the whole text
        state.lineStarts = lineStartsAfter(state.lineStarts, change.startOffset, change.endOffset, change.text);
        continue;
      } else {
        // Line endings with \r can change meaning outside the edited range (\r\n split or joined): parse afresh.
        state.text = state.text.slice(0, change.startOffset) + change.text + state.text.slice(change.endOffset);
        this.dropTree(state);
      }
      state.lineStarts = lineStartsOf(state.text);
    }
    state.version = version;
    state.stale = true;
    return state;
  }

  close(uri: string): void {
    const state = this.docs.get(uri);
    if (!state) return;
    this.dropTree(state);
    state.cache.clear();
    state.analysis = undefined;
    this.docs.delete(uri);
    this.factsGeneration++;
  }

  private dropTree(state: DocumentState): void {
    this.parser.release(state.tree);
    state.tree = null;
  }

  /**
   * Brings the analysis up to the current version and returns it: the parse and the IR when the text changed, the
   * rules when the IR, the settings or the workspace facts changed, nothing otherwise.
   */
  analyze(uri: string, settings: PrecisionLensSettings, workspace: WorkspaceFacts): DocumentState['analysis'] {
    const state = this.docs.get(uri);
    if (!state) return undefined;
    const rulesKey = JSON.stringify([settings, workspace]);
    // What the IR reads besides the text: the declared dimensions (settings, pyproject.toml) and the size limit.
    const path = state.uri.startsWith('file:') ? fileURLToPath(state.uri) : undefined;
    const dims = dimsForFile(settings, path);
    const sites = path && this.workspaceFiles.length ? sitesForFile(path, state.text, this.workspaceFiles.map((p) => ({ path: p, shown: relative(dirname(path), p) }))) : undefined;
    const irKey = JSON.stringify([dims ?? null, sites ?? null, settings.maxFileSize]);
    const current = state.analysis;
    if (current && !state.stale && state.irVersion === state.version && state.irKey === irKey) {
      if (state.rulesKey === rulesKey || current.skipped) return current;
      const started = performance.now();
      state.rulesKey = rulesKey;
      state.analysis = { ...current, findings: findingsOf(current.ir, pythonSource(state.text), settings, workspace), ms: performance.now() - started };
      return state.analysis;
    }
    const started = performance.now();
    const skipped = state.desynced ?? skipReason(state.text, settings);
    const done = (analysis: DocumentAnalysis, skip?: string): DocumentState['analysis'] => {
      state.stale = false;
      state.irVersion = state.version;
      state.irKey = irKey;
      state.rulesKey = rulesKey;
      state.analysis = { ...analysis, version: state.version, ms: performance.now() - started, ...(skip ? { skipped: skip } : {}) };
      const factsKey = JSON.stringify(fileFactsOf(analysis.ir));
      if (factsKey !== state.factsKey) { state.factsKey = factsKey; this.factsGeneration++; }
      return state.analysis;
    };
    if (skipped) {
      state.cache.clear();
      this.dropTree(state);
      return done({ ir: emptyIR(), findings: [] }, skipped);
    }
    const source = pythonSource(state.text);
    try {
      if (this.parser.needsRenewal) throw new ParserTrap(new Error('the parser is being reloaded'));
      if (state.stale || !this.parser.owns(state.tree)) state.tree = this.parser.parse(source, state.tree);
      if (!state.tree) return done({ ir: emptyIR(), findings: [] }, 'the parser gave no tree: not analysed');
      try {
        return done(analyzeParsed(state.tree, source, settings, workspace, state.cache, dims, sites, state.lineStarts));
      } catch (e) {
        // A trap while reading the tree corrupts the runtime as much as one while parsing.
        if (!isWasmTrap(e)) throw e;
        this.parser.retire(e);
        throw new ParserTrap(e);
      }
    } catch (e) {
      if (!(e instanceof ParserTrap)) throw e;
      // The runtime is retired: every document's tree belonged to it. Forget them without touching the old instance.
      this.forgetTrees();
      return done({ ir: emptyIR(), findings: [] }, e.message);
    }
  }

  /** Every document's tree belonged to a runtime that is gone: forget them (and the memos read from them). */
  private forgetTrees(): void {
    for (const doc of this.docs.values()) { doc.tree = null; doc.cache.clear(); }
  }

  /**
   * Gives back a WASM memory that grew past `limitBytes` while documents stay open (the document that grew it may be
   * closed: WASM memory never shrinks): the runtime goes with all its trees. The analyses stay current; each document
   * is parsed afresh, by the next runtime (the caller renews the parser), at its next edit. Returns whether it did.
   */
  shedParserIfLarger(limitBytes: number): boolean {
    if (!this.parser.shedIfLarger(limitBytes)) return false;
    this.forgetTrees();
    return true;
  }

  /** What the session holds: documents, their trees (as the parser counts them) and their memoised statements. */
  holdings(): { documents: number; trees: number; cachedStatements: number } {
    let cachedStatements = 0;
    for (const doc of this.docs.values()) cachedStatements += doc.cache.size;
    return { documents: this.docs.size, trees: this.parser.liveTrees, cachedStatements };
  }

  dispose(): void {
    for (const uri of [...this.docs.keys()]) this.close(uri);
  }
}
