/**
 * The hover card of a diagnostic: the explanation of every finding under the cursor (facts, consequence, what the fix
 * does, why no fix is offered, the terms it uses, the rule page). VS Code shows the diagnostic's one-line message next
 * to it, so the card never repeats it. Pure: findings and text in, markdown out.
 */
import type { PrecisionLensSettings } from '../../../common/settings';
import type { ModelIR } from '../analysis/ir';
import { explainRefusal, type FixEnv } from '../fixes/index';
import { explanationMarkdown } from '../rules/explain';
import type { Finding } from '../rules/types';

/** The markdown for the findings whose range holds `offset` (joined by rules), or undefined when there is none. */
export function hoverMarkdown(text: string, ir: ModelIR, findings: readonly Finding[], offset: number, settings: PrecisionLensSettings, env: FixEnv = {}): { markdown: string; finding: Finding } | undefined {
  const here = findings.filter((f) => f.span.startOffset <= offset && offset <= f.span.endOffset);
  if (!here.length) return undefined;
  // The innermost first: a layer inside a wider region speaks before the region.
  here.sort((a, b) => (a.span.endOffset - a.span.startOffset) - (b.span.endOffset - b.span.startOffset));
  const cards = here.slice(0, 3).map((f) => {
    const refusal = explainRefusal(text, ir, f, settings, env);
    return explanationMarkdown(f, refusal ? { refusals: [refusal] } : {});
  });
  return { markdown: cards.join('\n\n---\n\n'), finding: here[0] };
}
