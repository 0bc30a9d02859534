/**
 * Per-context memo for the parts of a fix that depend on the file only (the fallback wrapper's plan, the names the
 * file binds, the module's text): the CLI and a code-action request ask for the fixes of every finding of one
 * analysis with one FixContext, so computing these once per context keeps that linear in the number of findings.
 * A context is never changed after it is built (fixContext), so its memo never goes stale.
 */
import type { FixContext } from './types';

const memos = new WeakMap<FixContext, Map<string, unknown>>();

/** `make()` the first time `key` is asked for on this context; the same value afterwards. Callers must not mutate it. */
export function perContext<T>(ctx: FixContext, key: string, make: () => T): T {
  let memo = memos.get(ctx);
  if (!memo) memos.set(ctx, memo = new Map());
  if (memo.has(key)) return memo.get(key) as T;
  const value = make();
  memo.set(key, value);
  return value;
}
