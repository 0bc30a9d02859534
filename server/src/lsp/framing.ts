/**
 * A guard in front of vscode-jsonrpc's stdio reader. That reader (vscode-jsonrpc 10, ReadableStreamMessageReader)
 * reports a header block without Content-Length, or with one that is not a number, as an error and goes on reading
 * right after the bad header block, so the body that followed is taken as the next header and the stream stays out of
 * step; a negative Content-Length is accepted and leaves it waiting for a body it never reads; a header line without a
 * ':' throws inside the reader. The process stays up but answers nothing. This stream passes only well-formed frames
 * and skips anything else up to the next "Content-Length:" header. (VS Code itself talks to the server over Node IPC,
 * which has no framing; this guards the --stdio transport that other editors and the tests use.)
 */
import { Transform, Writable, type TransformCallback } from 'node:stream';

const HEADER_END = Buffer.from('\r\n\r\n');
const LENGTH_HEADER = /content-length/i;
/** Larger than any document the server analyses (maxFileSize) with its JSON escaping. */
const MAX_FRAME_BYTES = 256 * 1024 * 1024;
/** A header block longer than this is not a header block. */
const MAX_HEADER_BYTES = 8192;

/** The body length of a well-formed header block, or undefined. */
export function frameLength(header: string): number | undefined {
  let length: number | undefined;
  for (const line of header.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) return undefined;
    const name = line.slice(0, colon).trim();
    if (!/^[A-Za-z][A-Za-z0-9-]*$/.test(name)) return undefined;
    if (name.toLowerCase() !== 'content-length') continue;
    const value = line.slice(colon + 1).trim();
    if (!/^\d+$/.test(value)) return undefined;
    length = Number(value);
  }
  return length !== undefined && length <= MAX_FRAME_BYTES ? length : undefined;
}

/** Offset of the next "Content-Length" at or after `from` (case-insensitive), or -1. */
function nextLengthHeader(buffer: Buffer, from: number): number {
  const text = buffer.toString('latin1', from);
  const m = LENGTH_HEADER.exec(text);
  return m ? from + m.index : -1;
}

export class FrameGuard extends Transform {
  private buffer: Buffer = Buffer.alloc(0);
  /** Frames dropped as malformed (logged by the server). */
  dropped = 0;

  constructor(private readonly onDrop: (what: string) => void = () => {}) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    for (;;) {
      const end = this.buffer.indexOf(HEADER_END);
      if (end === -1) {
        if (this.buffer.length > MAX_HEADER_BYTES) this.skip(1, 'bytes without a header block');
        break;
      }
      const length = end <= MAX_HEADER_BYTES ? frameLength(this.buffer.toString('latin1', 0, end)) : undefined;
      if (length === undefined) {
        this.skip(1, `malformed header ${JSON.stringify(this.buffer.toString('latin1', 0, Math.min(end, 80)))}`);
        continue;
      }
      const total = end + HEADER_END.length + length;
      if (this.buffer.length < total) break;
      this.push(this.buffer.subarray(0, total));
      this.buffer = this.buffer.subarray(total);
    }
    done();
  }

  /** Drops everything before the next Content-Length header at or after `from` (all but a possible prefix of one). */
  private skip(from: number, what: string): void {
    const next = nextLengthHeader(this.buffer, from);
    // With none yet, keep only what may be the start of one: the last line's tail, after its last newline.
    const keep = next === -1 ? Math.max(this.buffer.lastIndexOf(10) + 1, this.buffer.length - 'content-length'.length, from) : next;
    this.buffer = this.buffer.subarray(keep);
    this.dropped++;
    this.onDrop(what);
  }
}

/**
 * The server's side of --stdio: vscode-jsonrpc writes each message as two chunks (its header block, then the body) and
 * waits for the first before it writes the second, so every message cost two write(2) calls on the pipe. This stream
 * holds a header block and writes it with the body that follows, in one call (the body's write is the one awaited).
 */
export class FrameJoiner extends Writable {
  private header: Buffer | undefined;

  constructor(private readonly out: NodeJS.WritableStream) {
    super();
    // the connection listens for errors on the stream it writes to (a closed pipe): pass the target's on
    out.on('error', (e: Error) => this.emit('error', e));
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    if (!this.header && chunk.length <= MAX_HEADER_BYTES && chunk.subarray(chunk.length - HEADER_END.length).equals(HEADER_END)) {
      this.header = chunk;
      done();
      return;
    }
    const data = this.header ? Buffer.concat([this.header, chunk]) : chunk;
    this.header = undefined;
    this.out.write(data, (e) => done(e ?? null));
  }

  override _final(done: (error?: Error | null) => void): void {
    if (this.header) this.out.write(this.header);
    this.header = undefined;
    done();
  }
}
