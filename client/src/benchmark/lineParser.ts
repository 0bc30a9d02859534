/**
 * Incremental JSON-lines parser for the benchmark's stdout. Chunks arrive split anywhere (inside a line, inside a
 * multi-byte UTF-8 character, between CR and LF); a line that is not JSON is reported, not fatal.
 * Pure: no `vscode` import.
 */
import { StringDecoder } from 'node:string_decoder';

export interface LineParserHandlers {
  /** A complete line that parsed as JSON. */
  onJson(value: unknown, line: string): void;
  /** A complete non-empty line that is not JSON (a stray print, a warning): log it. */
  onText?(line: string): void;
}

/** Longest line kept while waiting for its end; beyond it the partial line is reported as text and dropped. */
const MAX_LINE_LENGTH = 16 * 1024 * 1024;

export class JsonLineParser {
  private readonly decoder = new StringDecoder('utf8');
  private buffer = '';

  constructor(private readonly handlers: LineParserHandlers) {}

  /** Feeds a chunk (Buffer or string) and emits every line it completes. */
  push(chunk: Buffer | string): void {
    this.buffer += typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    let newline: number;
    while ((newline = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + 1);
      this.emit(line);
    }
    if (this.buffer.length > MAX_LINE_LENGTH) {
      const dropped = this.buffer;
      this.buffer = '';
      this.handlers.onText?.(`${dropped.slice(0, 200)}... (line longer than ${MAX_LINE_LENGTH} characters dropped)`);
    }
  }

  /** Emits the last line when the stream ended without a final newline. */
  end(): void {
    this.buffer += this.decoder.end();
    const rest = this.buffer;
    this.buffer = '';
    if (rest.length > 0) this.emit(rest);
  }

  private emit(rawLine: string): void {
    const line = rawLine.endsWith('\r') ? rawLine.slice(0, -1) : rawLine;
    const trimmed = line.trim();
    if (trimmed === '') return;
    const value = parseJsonLine(trimmed);
    if (value === undefined) this.handlers.onText?.(line);
    else this.handlers.onJson(value, line);
  }
}

/**
 * Parses one line as JSON; undefined when it is not JSON. Python's json.dumps writes NaN/Infinity by default, which
 * JSON.parse rejects: those bare tokens are read as null rather than losing the whole event.
 */
export function parseJsonLine(line: string): unknown {
  const first = line[0];
  if (first !== '{' && first !== '[') return undefined;
  try {
    return JSON.parse(line);
  } catch {
    if (!/NaN|Infinity/.test(line)) return undefined;
    try {
      return JSON.parse(replaceNonFiniteTokens(line));
    } catch {
      return undefined;
    }
  }
}

/** Replaces bare NaN / Infinity / -Infinity tokens outside strings with null. */
function replaceNonFiniteTokens(line: string): string {
  let out = '';
  let inString = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (inString) {
      out += c;
      if (c === '\\') {
        out += line[i + 1] ?? '';
        i++;
      } else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') {
      inString = true;
      out += c;
      continue;
    }
    const match = /^-?(?:NaN|Infinity)/.exec(line.slice(i, i + 9));
    if (match) {
      out += 'null';
      i += match[0].length - 1;
      continue;
    }
    out += c;
  }
  return out;
}
