/**
 * Per-document analysis state for the language server: text, version, the tree-sitter tree (edited incrementally)
 * and the last analysis. Knows nothing about the LSP connection, so it is tested directly.
 */
import type { PrecisionLensSettings } from '../../common/settings';
import { AnalysisCache } from './analysis';
import { fileURLToPath } from 'node:url';
import { analyzeParsed, emptyIR, skipReason, type DocumentAnalysis } from './engine';
import { dimsForFile } from './workspace-dims';
import { editTree, lineStartsOf, reparse, type TextChange } from './incremental';
import type { Parser, Tree } from './parser';
import type { WorkspaceFacts } from './rules/types';

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
}

export class AnalysisSession {
  private readonly docs = new Map<string, DocumentState>();

  constructor(private readonly parser: Parser) {}

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
    return state;
  }

  /**
   * Applies LSP content changes in order. Each range change edits the tree (cheap) so the next parse is
   * incremental; a whole-document change drops the tree.
   */
  change(uri: string, changes: readonly (TextChange | { text: string })[], version: number): DocumentState | undefined {
    const state = this.docs.get(uri);
    if (!state) return undefined;
    for (const change of changes) {
      if ('startOffset' in change) {
        state.text = state.tree
          ? editTree(state.tree, state.text, state.lineStarts, change)
          : state.text.slice(0, change.startOffset) + change.text + state.text.slice(change.endOffset);
      } else {
        state.text = change.text;
        state.tree?.delete();
        state.tree = null;
      }
      state.lineStarts = lineStartsOf(state.text);
    }
    state.version = version;
    state.stale = true;
    return state;
  }

  /** Forgets analyses (not trees) after a settings or workspace change, so the next analyze re-runs the rules. */
  invalidate(): void {
    for (const state of this.docs.values()) state.analysis = undefined;
  }

  close(uri: string): void {
    const state = this.docs.get(uri);
    state?.tree?.delete();
    state?.cache.clear();
    this.docs.delete(uri);
  }

  /** Brings the analysis up to the current version (re-parsing incrementally) and returns it. */
  analyze(uri: string, settings: PrecisionLensSettings, workspace: WorkspaceFacts): DocumentState['analysis'] {
    const state = this.docs.get(uri);
    if (!state) return undefined;
    if (!state.stale && state.analysis?.version === state.version) return state.analysis;
    const started = performance.now();
    const skipped = skipReason(state.text, settings);
    if (skipped) {
      state.cache.clear();
      state.tree?.delete();
      state.tree = null;
      state.stale = false;
      state.analysis = { ir: emptyIR(), findings: [], version: state.version, skipped, ms: 0 };
      return state.analysis;
    }
    if (state.stale || !state.tree) {
      state.tree = state.tree ? reparse(this.parser, state.text, state.tree) : this.parser.parse(state.text);
      state.stale = false;
    }
    const tree = state.tree;
    const path = state.uri.startsWith('file:') ? fileURLToPath(state.uri) : undefined;
    const result = tree ? analyzeParsed(tree, state.text, settings, workspace, state.cache, dimsForFile(settings, path)) : { ir: emptyIR(), findings: [] };
    state.analysis = { ...result, version: state.version, ms: performance.now() - started };
    return state.analysis;
  }

  dispose(): void {
    for (const uri of [...this.docs.keys()]) this.close(uri);
  }
}
