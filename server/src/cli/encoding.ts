/**
 * Source encodings, as Python reads them (PEP 263): a `# -*- coding: latin-1 -*-` cookie on one of the first two
 * lines names the codec, UTF-8 otherwise (a BOM says UTF-8 too). The CLI decodes with that codec and encodes its
 * writes back with it, so every byte outside a fix's range stays as it was. A file it cannot write back exactly (a
 * codec with no byte table here, bytes that are not valid in the codec, a character the codec cannot hold) is left
 * untouched, with a message.
 */

const COOKIE = /^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)/;

/** Python's codec names (and their aliases) that map to a WHATWG label TextDecoder knows, one byte per character. */
const SINGLE_BYTE: Record<string, string> = {
  'latin-1': 'latin1', latin1: 'latin1', 'iso-8859-1': 'latin1', iso8859_1: 'latin1', 'iso8859-1': 'latin1', l1: 'latin1', '8859': 'latin1', cp819: 'latin1',
  cp1252: 'windows-1252', 'windows-1252': 'windows-1252',
  cp1250: 'windows-1250', 'windows-1250': 'windows-1250', cp1251: 'windows-1251', 'windows-1251': 'windows-1251',
  'iso-8859-15': 'iso-8859-15', iso8859_15: 'iso-8859-15', latin9: 'iso-8859-15', 'iso-8859-2': 'iso-8859-2', iso8859_2: 'iso-8859-2', latin2: 'iso-8859-2',
  'koi8-r': 'koi8-r', koi8_r: 'koi8-r',
};
const UTF8 = new Set(['utf-8', 'utf8', 'utf_8', 'u8', 'utf', 'cp65001', 'utf-8-sig', 'utf_8_sig']);
const ASCII = new Set(['ascii', 'us-ascii', '646']);

/** How a file's bytes became its text, and how to turn a text back into bytes. */
export interface SourceEncoding {
  /** The codec as the cookie names it (lower-cased), or 'utf-8'. */
  name: string;
  /** Why the file cannot be written back exactly, when it cannot (then it is analysed but never written). */
  unwritable?: string;
}

/** The cookie's codec of a file's first two lines, lower-cased with `_` as `-` where Python allows either. */
export function declaredEncoding(bytes: Buffer): string | undefined {
  let start = 0;
  for (let line = 0; line < 2 && start < bytes.length; line++) {
    let end = bytes.indexOf(10, start);
    if (end < 0) end = bytes.length;
    const text = bytes.subarray(start, Math.min(end, start + 400)).toString('latin1');
    const m = COOKIE.exec(text);
    if (m) return m[1].toLowerCase();
    // The second line counts only when the first is a comment or blank (PEP 263).
    if (!/^[ \t\f]*(#.*)?\r?$/.test(text)) break;
    start = end + 1;
  }
  return undefined;
}

const tables = new Map<string, Map<number, number>>();

/** Character -> byte for a single-byte codec, from decoding each of the 256 bytes. */
function encodeTable(label: string): Map<number, number> {
  let table = tables.get(label);
  if (table) return table;
  table = new Map();
  const decoder = new TextDecoder(label);
  for (let b = 0; b < 256; b++) {
    const ch = decoder.decode(Uint8Array.of(b));
    if (ch.length === 1 && ch !== '\ufffd' && !table.has(ch.charCodeAt(0))) table.set(ch.charCodeAt(0), b);
  }
  tables.set(label, table);
  return table;
}

/** Decodes a file's bytes (a UTF-8 BOM already removed by the caller or not: it is kept in the text). */
export function decodeSource(bytes: Buffer): { text: string; encoding: SourceEncoding } {
  const declared = declaredEncoding(bytes);
  const name = declared ?? 'utf-8';
  const single = SINGLE_BYTE[name] ?? SINGLE_BYTE[name.replace(/_/g, '-')];
  if (single) {
    // latin1 is Buffer's own one-to-one mapping; the others through TextDecoder (WHATWG maps every byte).
    const text = single === 'latin1' ? bytes.toString('latin1') : new TextDecoder(single).decode(bytes);
    return { text, encoding: { name } };
  }
  if (!UTF8.has(name) && !ASCII.has(name)) {
    return { text: bytes.toString('utf8'), encoding: { name, unwritable: `its encoding ${name} (coding cookie) cannot be written back exactly here: not changed` } };
  }
  try {
    return { text: new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes), encoding: { name } };
  } catch {
    return { text: bytes.toString('utf8'), encoding: { name, unwritable: `it is not valid ${ASCII.has(name) ? 'ASCII' : 'UTF-8'} (and declares no other encoding): not changed, so no byte is lost` } };
  }
}

/** The bytes of `text` in the file's encoding, or why it cannot be encoded (then nothing is written). */
export function encodeSource(text: string, encoding: SourceEncoding | undefined): { bytes?: Buffer; error?: string } {
  const name = encoding?.name ?? 'utf-8';
  if (encoding?.unwritable) return { error: encoding.unwritable };
  const single = SINGLE_BYTE[name] ?? SINGLE_BYTE[name.replace(/_/g, '-')];
  if (!single) {
    if (ASCII.has(name)) {
      const bad = /[^\x00-\x7f]/.exec(text);
      if (bad) return { error: `the fixed text has ${JSON.stringify(bad[0])}, which its encoding (${name}) cannot hold: not changed` };
    }
    return { bytes: Buffer.from(text, 'utf8') };
  }
  const table = encodeTable(single);
  const out = Buffer.allocUnsafe(text.length);
  for (let i = 0; i < text.length; i++) {
    const b = table.get(text.charCodeAt(i));
    if (b === undefined) return { error: `the fixed text has ${JSON.stringify(text[i])}, which its encoding (${name}) cannot hold: not changed` };
    out[i] = b;
  }
  return { bytes: out };
}
