/**
 * What the workspace as a whole says (PL302 and friends): the open documents' facts as the CLI derives them from its
 * inputs, then what the workspace scan found in the other files. The server asks on every publish; the merge over
 * all open documents is redone only when one of them contributes something else (the session's factsGeneration),
 * or the scan or the environment changed, so a keystroke costs O(1) here instead of O(open documents).
 */
import { fileURLToPath } from 'node:url';
import { basename } from 'node:path';
import { bareStackDirs, fileFactsOf, mergeFileFacts } from '../engine/engine';
import type { WorkspaceFacts } from '../rules/types';
import type { AnalysisSession } from '../lsp/session';
import type { ScanResult } from './scan';

export class WorkspaceFactsView {
  private cached?: { generation: number; scan?: ScanResult; teVersion?: string; facts: WorkspaceFacts; key: string };

  constructor(private readonly session: () => AnalysisSession | undefined) {}

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
    const c = this.cached;
    if (c && c.generation === generation && c.scan === scan && c.teVersion === teVersion) return c;
    const facts = merge(session, scan, teVersion);
    this.cached = { generation, scan, teVersion, facts, key: JSON.stringify(facts) };
    return this.cached;
  }
}

function merge(session: AnalysisSession | undefined, scan: ScanResult | undefined, teVersion: string | undefined): WorkspaceFacts {
  const open = mergeFileFacts([...(session?.all() ?? [])].flatMap((d) => (d.analysis ? [fileFactsOf(d.analysis.ir)] : [])));
  const stackImports = { ...open.stackImports };
  for (const [file, mods] of scan?.stackFiles ?? []) for (const mod of mods) stackImports[mod] ??= `the FP8 conversion or quantization in ${basename(file)}`;
  const scanned = scan && !scan.truncated;
  // Where the te.* layers are: the open documents' analyses and the scan's files (PL306 reads them by folder and import).
  const teFiles = new Set<string>(scan?.teFiles ?? []);
  const compileFiles = new Set<string>(scan?.compileFiles ?? []);
  const importers: [string, string[]][] = [...(scan?.stackFiles ?? [])].map(([file, mods]) => [file, mods]);
  const gainFiles: string[] = [];
  const loseFiles: string[] = [];
  for (const d of session?.all() ?? []) {
    if (!d.analysis || !d.uri.startsWith('file:')) continue;
    const f = fileFactsOf(d.analysis.ir);
    const path = fileURLToPath(d.uri);
    if (f.te) teFiles.add(path);
    if (f.compile) compileFiles.add(path);
    if (Object.keys(f.stackImports).length) importers.push([path, Object.keys(f.stackImports)]);
    if (f.candidates) (f.gains ? gainFiles : loseFiles).push(path);
  }
  const stackDirs = bareStackDirs(importers);
  return {
    anyAutocastRegion: open.anyAutocastRegion || (scan && scan.autocastFiles.size > 0) ? true : scanned ? false : undefined,
    anyTraining: open.anyTraining || (scan && scan.trainFiles.size > 0) ? true : scanned ? false : undefined,
    anyTeLayers: open.anyTeLayers || (scan && scan.teFiles.size > 0) ? true : scanned ? false : undefined,
    ...(Object.keys(stackImports).length ? { stackImports } : {}),
    ...(stackDirs ? { stackDirs } : {}),
    anyCompile: open.anyCompile || (scan ? scan.compileFiles.size > 0 : undefined),
    ...(open.anyFp8Gains !== undefined ? { anyFp8Gains: open.anyFp8Gains } : {}),
    ...(teFiles.size ? { teFiles: [...teFiles].sort() } : {}),
    ...(compileFiles.size ? { compileFiles: [...compileFiles].sort() } : {}),
    ...(gainFiles.length ? { fp8GainFiles: gainFiles.sort() } : {}),
    ...(loseFiles.length ? { fp8LoseFiles: loseFiles.sort() } : {}),
    teVersion,
  };
}
