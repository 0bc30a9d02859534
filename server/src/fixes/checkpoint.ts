/**
 * PL501: a checkpoint loaded with strict=True across TE and plain modules fails on `_extra_state` keys. The fix loads
 * with strict=False and says why in a comment above the statement.
 */
import type { NotableCall } from '../analysis/ir';
import { appendArgs, insert, replace, type TextEdit } from './edits';
import { splitCallArgs, statementAt } from './source';
import { outcome, refuse, type FixContext, type FixOutcome } from './types';

export const EXTRA_STATE_COMMENT = '# TE modules store FP8 metadata in "_extra_state" keys; plain checkpoints lack them';

export function loadNonStrict(ctx: FixContext, call: NotableCall): FixOutcome {
  const open = ctx.text.indexOf('(', call.span.startOffset + call.callee.length);
  const args = open >= 0 ? splitCallArgs(ctx.text, open) : undefined;
  if (!args) return refuse('No automatic fix: the load_state_dict call could not be read.');
  const splat = args.args.find((a) => !a.name && /^\*/.test(a.value.trim()));
  if (splat) return refuse(`No automatic fix: the call passes ${splat.value.trim()}; set strict=False where those arguments are built.`);
  const edits: TextEdit[] = [];
  const strict = args.args.find((a) => a.name === 'strict');
  const positional = args.args.filter((a) => !a.name);
  // strict=False also accepts checkpoints with really missing or unexpected keys (an explicit strict=True may be
  // deliberate, resuming TE -> TE): a person decides, so the fix is offered in the editor, never batch-applied.
  if (strict) edits.push(replace(strict.valueStart, strict.end, 'False'));
  else if (positional.length > 1) edits.push(replace(positional[1].start, positional[1].end, 'False'));
  else edits.push(appendArgs(ctx.text, args, ['strict=False'])!);
  const stmt = statementAt(ctx.model, call.span.startOffset);
  if (stmt && !ctx.text.slice(Math.max(0, stmt.lineStart - 200), stmt.lineStart).includes(EXTRA_STATE_COMMENT)) {
    edits.push(insert(stmt.lineStart, `${stmt.indent}${EXTRA_STATE_COMMENT}\n`));
  }
  return outcome([{
    id: `PL501:${call.text.replace(/\s+/g, ' ').slice(0, 60)}@${call.span.startOffset}`, title: 'Load with strict=False (TE "_extra_state" keys)', kind: 'quickfix',
    codes: ['PL501'], safe: false, isPreferred: true, edits,
  }]);
}
