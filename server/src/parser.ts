/**
 * Loads web-tree-sitter and the Python grammar (WASM). The bundles in out/ find both .wasm files next to themselves;
 * tests running from source find them in node_modules.
 */
import { existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
// A CommonJS esbuild bundle must load web-tree-sitter with require (its ESM entry uses import.meta).
// eslint-disable-next-line @typescript-eslint/no-var-requires
const TreeSitter = require('web-tree-sitter') as typeof import('web-tree-sitter');

export type Parser = import('web-tree-sitter').Parser;
export type Tree = import('web-tree-sitter').Tree;
export type SyntaxNode = import('web-tree-sitter').Node;
export type Language = import('web-tree-sitter').Language;
export const Edit = TreeSitter.Edit;

/** The bundle's own directory first (out/), else the package in node_modules (tests from source). */
function locate(file: string, packageEntry: string): string {
  const beside = join(__dirname, file);
  if (existsSync(beside)) return beside;
  return join(dirname(require.resolve(packageEntry)), file);
}

let languagePromise: Promise<Language> | undefined;

/** Initialises the WASM runtime once and loads tree-sitter-python. */
export function loadPython(): Promise<Language> {
  if (!languagePromise) {
    languagePromise = (async () => {
      const runtimeWasm = locate('web-tree-sitter.wasm', 'web-tree-sitter');
      await TreeSitter.Parser.init({ locateFile: () => runtimeWasm });
      return TreeSitter.Language.load(locate('tree-sitter-python.wasm', 'tree-sitter-python/package.json'));
    })();
  }
  return languagePromise;
}

/** A parser for Python, ready to use. */
export async function createPythonParser(): Promise<Parser> {
  const language = await loadPython();
  const parser = new TreeSitter.Parser();
  parser.setLanguage(language);
  return parser;
}
