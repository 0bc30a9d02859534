/**
 * All rule families, and the one place where user settings (rule off, severity override) are applied.
 */
import type { RuleCode } from '../../../common/codes';
import { attentionRules } from './attention';
import { scaleRules } from './scale';
import { autocastRules } from './autocast';
import { checkpointRules } from './checkpoint';
import { compiledRules } from './compiled';
import { conversionRules } from './conversion';
import { fallbackRules } from './fallback';
import { fusionRules } from './fusion';
import { precisionRules } from './precision';
import { ptqRules } from './ptq';
import type { Finding, RuleContext, RuleModule } from './types';

export const RULE_MODULES: readonly RuleModule[] = [conversionRules, fusionRules, attentionRules, precisionRules, autocastRules, compiledRules, fallbackRules, checkpointRules, ptqRules, scaleRules];

/** Runs every enabled rule; findings come back ordered by position with the configured severities. */
export function runRules(ctx: RuleContext): Finding[] {
  const overrides = ctx.settings.rules;
  const findings: Finding[] = [];
  for (const module of RULE_MODULES) {
    if (module.codes.every((c: RuleCode) => overrides[c] === 'off')) continue;
    for (const f of module.check(ctx)) {
      const override = overrides[f.code];
      if (override === 'off') continue;
      findings.push(override ? { ...f, severity: override } : f);
    }
  }
  return findings.sort((a, b) => a.span.startOffset - b.span.startOffset || a.code.localeCompare(b.code));
}

export type { Finding, RuleContext, WorkspaceFacts } from './types';
