/**
 * Where a file's FP8 fallback lives: the project's one module (DESIGN.md, "The FP8 fallback module") or, for a file
 * outside any workspace folder, an inline block. Shared by the language server and the CLI; the file system is
 * reached only through the `exists` function they pass in.
 */
import { dirname, isAbsolute, join, relative, sep } from 'node:path';
import type { FallbackModule } from '../fixes/types';

/** The workspace folder holding `file` (the innermost), if any. */
export function rootOf(file: string, roots: readonly string[]): string | undefined {
  let best: string | undefined;
  for (const r of roots) {
    const rel = relative(r, file);
    if (rel && !rel.startsWith('..') && !isAbsolute(rel) && (!best || r.length > best.length)) best = r;
  }
  return best;
}

/** `a/b/fp8_fallback.py` relative to the root, as a dotted module name (`a.b.fp8_fallback`). */
function dottedFrom(root: string, path: string): string {
  return relative(root, path).replace(/\.py$/, '').split(sep).join('.');
}

/** The module name `file` imports the module under: same folder -> bare (or `.name` in a package that imports relatively). */
function importName(file: string, modulePath: string, root: string, relativeImports: boolean): string {
  const name = modulePath.slice(dirname(modulePath).length + 1).replace(/\.py$/, '');
  if (dirname(modulePath) === dirname(file)) return relativeImports ? `.${name}` : name;
  return dottedFrom(root, modulePath);
}

/**
 * The fallback module for `file`, or undefined for an inline block (the file is outside every workspace folder).
 * `setting` is settings.fallbackModule: a module name, looked for in the file's folder and the packages above it up to
 * the workspace folder (created beside the file when none has it), or a path relative to the workspace folder.
 * `fileText` tells whether the file imports package-relatively (`from .model import`).
 */
export function locateFallbackModule(
  file: string, roots: readonly string[], setting: string, exists: (path: string) => boolean, fileText = '',
): FallbackModule | undefined {
  const root = rootOf(file, roots);
  if (!root) return undefined;
  const relativeImports = /^from\s+\.+\w*\s+import\b/m.test(fileText);
  if (setting.endsWith('.py')) {
    const path = join(root, ...setting.split('/'));
    if (path === file) return undefined;
    return { importFrom: importName(file, path, root, relativeImports), path, exists: exists(path) };
  }
  // Up from the file's folder while that folder is a package (a module above a plain folder would not be importable
  // from a script run there); a layout where it is (the project root on sys.path) names the path in the setting.
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const path = join(dir, `${setting}.py`);
    if (path !== file && exists(path)) return { importFrom: importName(file, path, root, relativeImports), path, exists: true };
    if (dir === root || dirname(dir) === dir || relative(root, dir).startsWith('..') || !exists(join(dir, '__init__.py'))) break;
  }
  const path = join(dirname(file), `${setting}.py`);
  return path === file ? undefined : { importFrom: importName(file, path, root, relativeImports), path, exists: false };
}
