/**
 * `**name` in a constructor call, where `name` is a dict literal bound earlier in the same function with string keys
 * (timm's `dd = {'device': device, 'dtype': dtype}`, `factory_kwargs = dict(device=device, dtype=dtype)`): its keys are
 * known, so a conversion can name them (`device=dd["device"], params_dtype=dd["dtype"]`), reading the same dict at
 * the same moment. Text-based and bounded: it looks back from the call, within the enclosing `def`, for the latest
 * plain assignment of `name` at the call's indentation or above; anything else (a reassignment in a nested block,
 * a dict built by a call or a comprehension, non-string keys, `**` inside the dict) gives undefined.
 */

/** At most this many lines are read back from the call. */
const MAX_LINES_BACK = 400;

const indentOf = (line: string): number => line.length - line.trimStart().length;

/** The top-level comma-separated items of `body` (no brackets inside it are allowed), or undefined. */
function items(body: string): string[] | undefined {
  if (/[()[\]{}]/.test(body)) return undefined;
  return body.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
}

/** The keys of a dict literal `{'a': x, "b": y}` or `dict(a=x, b=y)`, or undefined when it is anything else. */
export function dictLiteralKeys(expr: string): string[] | undefined {
  const e = expr.trim();
  const braces = /^\{([\s\S]*)\}$/.exec(e);
  const call = /^dict\(([\s\S]*)\)$/.exec(e);
  const parts = items((braces ?? call)?.[1] ?? '(');
  if (!parts) return undefined;
  const keys: string[] = [];
  for (const p of parts) {
    const m = braces ? /^(['"])([A-Za-z_]\w*)\1\s*:\s*\S[\s\S]*$/.exec(p) : /^([A-Za-z_]\w*)\s*=\s*\S[\s\S]*$/.exec(p);
    if (!m) return undefined;
    keys.push(braces ? m[2] : m[1]);
  }
  return keys;
}

/** The keys `**name` passes at the call starting at `callOffset`, when `name` is a dict literal bound as described above. */
export function splatKeys(text: string, callOffset: number, name: string): string[] | undefined {
  if (!/^[A-Za-z_]\w*$/.test(name)) return undefined;
  const lines = text.slice(0, callOffset).split('\n');
  const callLine = lines[lines.length - 1];
  let limit = indentOf(callLine);
  const assign = new RegExp(`^${name}\\s*=\\s*(.+?)\\s*(#.*)?$`);
  const rebind = new RegExp(`(^|[^\\w.])${name}\\s*(=[^=]|\\+=|\\|=)|\\bfor\\s+${name}\\b|\\bas\\s+${name}\\b`);
  for (let i = lines.length - 2, n = 0; i >= 0 && n < MAX_LINES_BACK; i--, n++) {
    const line = lines[i];
    if (!line.trim() || line.trimStart().startsWith('#')) continue;
    const indent = indentOf(line);
    const body = line.trim();
    if (indent < limit) {
      if (/^(async\s+)?def\s|^class\s/.test(body)) return undefined; // left the function without finding it
      limit = indent;
    }
    if (indent > limit) {
      if (rebind.test(body)) return undefined; // bound in a nested block: which value reaches the call is not plain
      continue;
    }
    const m = assign.exec(body);
    if (m) return dictLiteralKeys(m[1]);
    if (rebind.test(body)) return undefined;
  }
  return undefined;
}
