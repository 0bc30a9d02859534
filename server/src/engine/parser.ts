/**
 * Loads web-tree-sitter and the Python grammar (WASM). The bundles in out/ find the runtime (web-tree-sitter.cjs) and
 * both .wasm files next to themselves; tests running from source find them in node_modules.
 *
 * A WASM trap (web-tree-sitter's "memory access out of bounds" on some deeply nested broken input) leaves that WASM
 * instance corrupted: every later call into it may trap too, including deleting its trees. PythonParser therefore
 * owns one runtime (a fresh copy of web-tree-sitter with its own WASM instance) at a time, retires it on a trap and
 * loads a new one; trees of a retired runtime are never used again.
 */
import { existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { getHeapStatistics } from 'node:v8';

type Binding = typeof import('web-tree-sitter');
export type Parser = import('web-tree-sitter').Parser;
export type Tree = import('web-tree-sitter').Tree;
export type SyntaxNode = import('web-tree-sitter').Node;
export type Language = import('web-tree-sitter').Language;

/** The bundle's own directory first (out/), else the package in node_modules (tests from source). */
function locate(file: string, packageEntry: string): string {
  const beside = join(__dirname, file);
  if (existsSync(beside)) return beside;
  return join(dirname(require.resolve(packageEntry)), file);
}

/**
 * A fresh copy of the web-tree-sitter module: its WASM instance is module state, so a new instance needs the module
 * evaluated again. The path is computed, so the bundler leaves this require to run time (build.mjs copies the file).
 */
function freshBinding(): Binding {
  const path = locate('web-tree-sitter.cjs', 'web-tree-sitter');
  delete require.cache[path];
  // eslint-disable-next-line @typescript-eslint/no-var-requires
  const binding = require(path) as Binding;
  // Neither the cache nor this module's children may keep it: a retired runtime's memory must be collectable.
  const loaded = require.cache[path];
  delete require.cache[path];
  if (loaded) module.children.splice(module.children.indexOf(loaded) >>> 0, 1);
  return binding;
}

/** The first binding: the one createPythonParser and the Edit class come from. */
const primary = freshBinding();
export const Edit = primary.Edit;

/**
 * The options object web-tree-sitter's Emscripten module is created from: Emscripten uses it as the module itself and
 * keeps `HEAP8` on it current (a new view after every growth), so `HEAP8.buffer.byteLength` is the WASM memory's size.
 */
interface ModuleOptions { locateFile: () => string; HEAP8?: Int8Array }

async function loadLanguage(binding: Binding, options: ModuleOptions = { locateFile: () => '' }): Promise<Language> {
  const runtimeWasm = locate('web-tree-sitter.wasm', 'web-tree-sitter');
  options.locateFile = () => runtimeWasm;
  await binding.Parser.init(options);
  return binding.Language.load(locate('tree-sitter-python.wasm', 'tree-sitter-python/package.json'));
}

let languagePromise: Promise<Language> | undefined;

/** Initialises the primary WASM runtime once and loads tree-sitter-python. */
export function loadPython(): Promise<Language> {
  languagePromise ??= loadLanguage(primary);
  return languagePromise;
}

/** A parser on the primary runtime, shared by all such parsers (tests and tools; processes use PythonParser). */
export async function createPythonParser(): Promise<Parser> {
  const language = await loadPython();
  const parser = new primary.Parser();
  parser.setLanguage(language);
  return parser;
}

/** The WASM runtime trapped on this input; the caller reports the document as not analysed. */
export class ParserTrap extends Error {
  constructor(cause: unknown) {
    super(`the parser failed on this file (${cause instanceof Error ? cause.message : String(cause)}): not analysed`);
  }
}

/** Whether an error is a WASM trap (the instance that raised it can no longer be trusted). */
export function isWasmTrap(e: unknown): boolean {
  return e instanceof WebAssembly.RuntimeError || (e instanceof Error && e.name === 'RuntimeError');
}

interface Runtime {
  parser: Parser;
  /** The Emscripten module of this runtime (its WASM memory's size). */
  module: ModuleOptions;
  /** Trees this runtime made that are not deleted yet: delete() goes through here, so each happens once. */
  live: Set<Tree>;
}

/**
 * The Python parser of a long-lived process (language server, CLI run): parse() never lets a trap escape as
 * anything but ParserTrap, and after one the next renew() brings a fresh runtime.
 */
export class PythonParser {
  private runtime: Runtime | undefined;
  /** WASM traps met so far (each retired a runtime). */
  traps = 0;
  /** Runtimes loaded so far (the first, then one per renew() after a trap, a recycle or a shed). */
  runtimesLoaded = 0;

  private constructor() {}

  static async create(): Promise<PythonParser> {
    const host = new PythonParser();
    await host.renew();
    return host;
  }

  /** Whether a fresh runtime must be loaded (renew()) before the next parse. */
  get needsRenewal(): boolean {
    return this.runtime === undefined;
  }

  /** Loads a new runtime when the last one was retired (a trap); a no-op otherwise. */
  async renew(): Promise<void> {
    if (this.runtime) return;
    // Never the primary runtime: a trap corrupts the instance, so a host shares it with nobody.
    const binding = freshBinding();
    const module: ModuleOptions = { locateFile: () => '' };
    const language = await loadLanguage(binding, module);
    const parser = new binding.Parser();
    parser.setLanguage(language);
    this.runtime = { parser, module, live: new Set() };
    this.runtimesLoaded++;
  }

  /** Trees of the current runtime that are not deleted yet. */
  get liveTrees(): number {
    return this.runtime?.live.size ?? 0;
  }

  /** The size of the current runtime's WASM memory in bytes (0 when none is loaded); it only grows. */
  get wasmBytes(): number {
    return this.runtime?.module.HEAP8?.buffer.byteLength ?? 0;
  }

  /**
   * Parses `text`, incrementally from `old` when it is a live tree of the current runtime (then `old` is deleted).
   * Throws ParserTrap on a WASM trap (the runtime is retired), or when no runtime is loaded.
   */
  parse(text: string, old?: Tree | null): Tree | null {
    const rt = this.runtime;
    if (!rt) throw new ParserTrap(new Error('no parser loaded after an earlier failure'));
    const base = old && rt.live.has(old) ? old : undefined;
    let tree: Tree | null;
    try {
      tree = rt.parser.parse(text, base);
    } catch (e) {
      this.retire(e);
      throw new ParserTrap(e);
    }
    if (base) this.release(base);
    if (tree) rt.live.add(tree);
    return tree;
  }

  /** Deletes a tree exactly once; trees of a retired runtime (or already deleted) are left alone. */
  release(tree: Tree | null | undefined): void {
    if (!tree || !this.runtime?.live.delete(tree)) return;
    tree.delete();
  }

  /** Whether `tree` belongs to the current runtime (and is not deleted). */
  owns(tree: Tree | null | undefined): boolean {
    return !!tree && !!this.runtime?.live.has(tree);
  }

  /**
   * After a trap (in parsing or in reading a tree): forget the runtime. Its objects are deleted inside try: each
   * delete() unregisters the object from web-tree-sitter's finalizers before it calls into WASM, so no finalizer can
   * run into the corrupted instance later, whatever that call does.
   */
  retire(cause?: unknown): void {
    const rt = this.runtime;
    if (!rt || (cause !== undefined && !isWasmTrap(cause))) return;
    this.runtime = undefined;
    this.traps++;
    for (const tree of rt.live) try { tree.delete(); } catch { /* the instance is gone */ }
    rt.live.clear();
    try { rt.parser.delete(); } catch { /* the instance is gone */ }
  }

  /**
   * Drops the runtime when no tree is left (the server's last document closed): WASM memory only grows, so a fresh
   * runtime, loaded by the next renew(), is how the process gives that memory back.
   */
  recycle(): boolean {
    if (!this.runtime || this.runtime.live.size > 0) return false;
    this.dispose();
    return true;
  }

  /**
   * Drops the runtime when no tree is left and the process holds more than `limitBytes` outside the JS heap (the WASM
   * memory, which only grows, is most of it): after an unusually large file the next renew() starts small again, so a
   * long run (a CI batch, the fuzzer) does not keep the peak of its largest input for every file after it.
   */
  recycleIfLarge(limitBytes = 256 * 1048576): boolean {
    if (!this.runtime || this.runtime.live.size > 0 || getHeapStatistics().external_memory < limitBytes) return false;
    return this.recycle();
  }

  /**
   * Drops the runtime, live trees and all, when its WASM memory grew past `limitBytes` (a large document, since
   * closed, grew it; it never shrinks): its trees are deleted here and the caller must forget them (the documents
   * still open are parsed afresh by the next renew()'s runtime). Returns whether it did.
   */
  shedIfLarger(limitBytes: number): boolean {
    if (!this.runtime || this.wasmBytes <= limitBytes) return false;
    this.dispose();
    return true;
  }

  dispose(): void {
    const rt = this.runtime;
    this.runtime = undefined;
    if (!rt) return;
    for (const tree of rt.live) tree.delete();
    rt.live.clear();
    rt.parser.delete();
  }
}
