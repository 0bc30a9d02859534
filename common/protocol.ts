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

/** The prefix of rule documentation links; kept here so client and server agree. */
export const SERVER_NAME = 'Precision Lens';
