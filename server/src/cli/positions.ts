/**
 * The CLI's position convention: lines and columns are 1-based; columns count UTF-16 code units (+1), the unit LSP,
 * VS Code and SARIF's default `utf16CodeUnits` column kind use. The IR is 0-based.
 */
import type { Span } from '../analysis/ir';

export interface Position1 {
  line: number;
  column: number;
  endLine: number;
  endColumn: number;
}

export function oneBased(span: Span): Position1 {
  return { line: span.startLine + 1, column: span.startColumn + 1, endLine: span.endLine + 1, endColumn: span.endColumn + 1 };
}
