/**
 * Custom LSP messages between the client and the server, declared once (method names and payload types).
 */

/** client -> server: facts about the selected Python environment that change generated code and rules. */
export const EnvironmentNotification = 'precisionLens/environment' as const;
export interface EnvironmentParams {
  /** transformer_engine.__version__ of the selected interpreter; undefined when TE is not installed or unknown. */
  teVersion?: string;
  /** The interpreter that was asked. */
  pythonPath?: string;
}

/** server -> client: health and activity of the server, shown in the language status item. */
export const StatusNotification = 'precisionLens/status' as const;
export interface StatusParams {
  state: 'starting' | 'ready' | 'error';
  /** Short text for the status item. */
  message: string;
  /** Documents currently analysed. */
  documents: number;
  /** Duration of the last analysis in milliseconds. */
  lastAnalysisMs?: number;
  /** Layers convertible / total in the active document, when the client asked for it. */
}

/**
 * client -> server (tools and tests; the extension does not send it): what the server holds and where its memory is.
 * After the last document closes, `trees` and `cachedStatements` are 0, `parserRuntimes` counts the fresh WASM runtime
 * and `releases` the memory-reducing collections that followed (the server logs "memory released" after each).
 */
export const MemoryRequest = 'precisionLens/memory' as const;
export interface MemoryReport {
  /** Open documents, their tree-sitter trees not yet deleted, and the statements memoised for them. */
  documents: number;
  trees: number;
  cachedStatements: number;
  /** WASM runtimes of the parser loaded so far, and the current one's memory in bytes (it only grows). */
  parserRuntimes: number;
  wasmBytes: number;
  /** Times the server gave memory back after its last document closed. */
  releases: number;
  /** process.memoryUsage() and V8's young generation (committed), in bytes. */
  process: { rss: number; heapTotal: number; heapUsed: number; external: number; arrayBuffers: number; newSpace: number };
}

/** The prefix of rule documentation links; kept here so client and server agree. */
export const SERVER_NAME = 'Precision Lens';
