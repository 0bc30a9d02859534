/**
 * What the workspace as a whole says (PL302 and friends): the open documents' facts as the CLI derives them from its
 * inputs, then what the workspace scan found in the other files. The server asks on every publish; the merge over
 * all open documents is redone only when one of them contributes something else (the session's factsGeneration),
 * or the scan or the environment changed, so a keystroke costs O(1) here instead of O(open documents).
 */
import { fileURLToPath } from 'node:url';
import { basename } from 'node:path';
import { fileFactsOf, mergeFileFacts, pathFacts } from '../engine/engine';
import type { WorkspaceFacts } from '../rules/types';
import type { AnalysisSession } from '../lsp/session';
import type { ImportedModelGains } from './gains';
import type { ScanResult } from './scan';

export class WorkspaceFactsView {
  private cached?: { generation: number; gainsGeneration: number; scan?: ScanResult; teVersion?: string; facts: WorkspaceFacts; key: string };

  constructor(private readonly session: () => AnalysisSession | undefined, private readonly imported?: ImportedModelGains) {}

  /** PL302 stays quiet (undefined) until the scan has proven there is no autocast. */
  facts(scan: ScanResult | undefined, teVersion: string | undefined): WorkspaceFacts {
    return this.current(scan, teVersion).facts;
  }

  /** The facts as a string, to tell whether they changed. */
  key(scan: ScanResult | undefined, teVersion: string | undefined): string {
    return this.current(scan, teVersion).key;
  }

  private current(scan: ScanResult | undefined, teVersion: string | undefined): NonNullable<WorkspaceFactsView['cached']> {
    const session = this.session();
    const generation = session?.factsGeneration ?? -1;
    const gainsGeneration = this.imported?.generation ?? 0;
    const c = this.cached;
    if (c && c.generation === generation && c.gainsGeneration === gainsGeneration && c.scan === scan && c.teVersion === teVersion) return c;
    const facts = merge(session, scan, teVersion, this.imported);
    this.cached = { generation, gainsGeneration, scan, teVersion, facts, key: JSON.stringify(facts) };
    return this.cached;
  }
}

function merge(session: AnalysisSession | undefined, scan: ScanResult | undefined, teVersion: string | undefined, imported?: ImportedModelGains): WorkspaceFacts {
  const open = mergeFileFacts([...(session?.all() ?? [])].flatMap((d) => (d.analysis ? [fileFactsOf(d.analysis.ir)] : [])));
  const stackImports = { ...open.stackImports };
  for (const [file, mods] of scan?.stackFiles ?? []) for (const mod of mods) stackImports[mod] ??= `the FP8 conversion or quantization in ${basename(file)}`;
  const scanned = scan && !scan.truncated;
  // Which project a te.* layer, a compile call, a predicted loss or another stack's import belongs to: the open
  // documents' analyses, the scan's files and the models the compiling scripts import, read from disk (PL305 and
  // PL306 read them by folder and import).
  const byPath = pathFacts(
    [...(session?.all() ?? [])].flatMap((d) => (d.analysis && d.uri.startsWith('file:') ? [[fileURLToPath(d.uri), fileFactsOf(d.analysis.ir)] as const] : [])),
    {
      te: scan?.teFiles, compile: scan?.compileFiles, importers: scan?.stackFiles, gains: imported?.facts(),
      allGather: scan?.allGatherFiles, fsdp1: scan?.fsdp1Files, precompute: scan?.precomputeFiles,
    },
  );
  return {
    anyAutocastRegion: open.anyAutocastRegion || (scan && scan.autocastFiles.size > 0) ? true : scanned ? false : undefined,
    anyTraining: open.anyTraining || (scan && scan.trainFiles.size > 0) ? true : scanned ? false : undefined,
    anyTeLayers: open.anyTeLayers || (scan && scan.teFiles.size > 0) ? true : scanned ? false : undefined,
    ...(Object.keys(stackImports).length ? { stackImports } : {}),
    anyCompile: open.anyCompile || (scan ? scan.compileFiles.size > 0 : undefined),
    ...(open.anyFp8Gains !== undefined ? { anyFp8Gains: open.anyFp8Gains } : {}),
    ...byPath,
    teVersion,
  };
}
