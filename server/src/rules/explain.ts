/**
 * The long form of a finding: sentence helpers for rule messages, and the renderings of a finding's explanation (the
 * hover card's markdown, the plain text of the CLI's JSON). Pure: no LSP here.
 *
 * The split: `Finding.message` is one sentence (verdict + action, about 120 characters); `related` holds the evidence
 * with its locations; `explanation` holds the facts, the consequence and what the fix does. The hover never repeats
 * the message (VS Code shows the diagnostic next to it), and a sentence is said once.
 */
import { ruleDocUrl, RULES, type RuleCode } from '../../../common/codes';
import type { Explanation, Finding } from './types';

/**
 * Results of the pure sentence helpers by input text: a run's findings repeat the same facts (10,000 layers of one
 * class: the same FP8-rule and init sentences 10,000 times), so each text is split and normalised once. Bounded: a
 * full memo starts over.
 */
const MEMO_LIMIT = 20_000;
const sentenceMemo = new Map<string, readonly string[]>();
const normalMemo = new Map<string, string>();

function memoised<T>(memo: Map<string, T>, key: string, compute: (key: string) => T): T {
  let hit = memo.get(key);
  if (hit === undefined) {
    if (memo.size >= MEMO_LIMIT) memo.clear();
    memo.set(key, hit = compute(key));
  }
  return hit;
}

/** Splits text into sentences (keeps abbreviations such as "e.g." and dotted names such as `te.Linear` whole). */
export function sentences(text: string): string[] {
  return [...memoised(sentenceMemo, text, splitSentences)];
}

function splitSentences(text: string): string[] {
  return text
    .split(/(?<=[.!?])\s+(?=[A-Z"`(<\d])/)
    .map((s) => s.trim())
    .filter(Boolean)
    .reduce<string[]>((out, s) => {
      // "e.g. Foo" or "i.e. Foo" split wrongly: glue back.
      if (out.length && /\b(?:e\.g|i\.e|cf|vs)\.$/.test(out[out.length - 1])) out[out.length - 1] += ` ${s}`;
      else out.push(s);
      return out;
    }, []);
}

/** Ends a phrase with a full stop unless it already ends a sentence. */
export function asSentence(text: string): string {
  const t = text.trim();
  if (!t) return t;
  const capital = t[0].toUpperCase() + t.slice(1);
  return /[.!?]$/.test(capital) ? capital : `${capital}.`;
}

/** A phrase for the end of a message: lower-cased first letter (unless a name), no final full stop. */
export function asClause(text: string): string {
  const t = text.trim().replace(/[.!]$/, '');
  return /^[A-Z][a-z]/.test(t) && !/^[A-Z][a-z]+[A-Z]/.test(t) ? t[0].toLowerCase() + t.slice(1) : t;
}

/**
 * The gist of a refusal or reason, for a title: without "Not converted:" / "No automatic fix:", cut at the first
 * colon, semicolon or parenthesis (at most `max` characters, else cut at a word).
 */
export function gistOf(text: string, max = 80): string {
  const body = text.replace(/^(?:Not converted|No automatic fix|No FP8 autocast wrap)(?: here| in this file)?:\s*/i, '').trim();
  const cut = body.split(/:\s|;\s|\s\(|,\s(?:so|which|because)\s/)[0].replace(/[.]$/, '').trim();
  if (cut.length <= max) return cut;
  return `${cut.slice(0, cut.lastIndexOf(' ', max - 3))}...`;
}

/** Removes parenthesised asides, so a clause stays short: "eps (1e-5) differs" -> "eps differs". */
function withoutAsides(text: string): string {
  let out = text;
  for (let i = 0; i < 3; i++) out = out.replace(/\s*\([^()]*\)/g, '');
  return out.replace(/\s+/g, ' ').trim();
}

/** Balanced parentheses and quotes: a clause cut there would read as a fragment otherwise. */
function balanced(text: string): boolean {
  let depth = 0;
  for (const ch of text) {
    if (ch === '(' || ch === '[') depth++;
    else if (ch === ')' || ch === ']') depth--;
    if (depth < 0) return false;
  }
  return depth === 0 && (text.match(/"/g)?.length ?? 0) % 2 === 0;
}

/**
 * The action a verdict's reasons end with ("Convert by hand.", "Keep this norm, or accept a learnable bias"), short
 * enough for a message (at most `max` characters), or undefined. Reasons are written "facts: consequence. Action.":
 * the last sentence, else the last clause after a colon or semicolon.
 */
export function actionOf(reasons: readonly string[], max = 72): string | undefined {
  for (const reason of [...reasons].reverse()) {
    const all = sentences(reason);
    const last = all[all.length - 1];
    if (!last) continue;
    const candidates = [last, ...last.split(/[:;] /).reverse(), ...last.split(/, so |, then /).slice(1)];
    for (const c of candidates) {
      const clause = withoutAsides(c);
      if (clause.length >= 12 && clause.length <= max && balanced(clause) && /^(?:[A-Z]?[a-z]+)/.test(clause)
        && /\b(?:keep|convert|check|pass|use|port|build|move|pad|accept|map|copy|guard|call|run|restore|exclude|drop|extend)\b/i.test(clause)) {
        return asClause(clause);
      }
    }
  }
  return undefined;
}

/** Jargon the hover explains once, where its text uses the term (data: term, pattern, explanation). */
const GLOSSARY: ReadonlyArray<{ term: string; pattern: RegExp; means: string }> = [
  { term: 'FP8', pattern: /\bFP8\b/, means: '8-bit floating point; TE runs matrix multiplies in E4M3 (forward) and E5M2 (gradients) with per-tensor scaling factors' },
  { term: 'GEMM', pattern: /\bGEMMs?\b/, means: 'a general matrix multiply, the operation inside a Linear layer' },
  { term: 'autocast', pattern: /\bautocast\b/i, means: 'the `with te.autocast(...)` (before TE 2.9: `te.fp8_autocast`) block inside which TE modules compute in FP8' },
  { term: 'recipe', pattern: /\brecipes?\b|DelayedScaling|Float8CurrentScaling/, means: 'the object that tells TE how to scale FP8 tensors (DelayedScaling, Float8CurrentScaling, block scaling)' },
  { term: 'amax', pattern: /\bamax\b/, means: 'the largest absolute value seen in a tensor; TE derives the FP8 scaling factor from it' },
  { term: 'lm-head', pattern: /\blm-head\b/, means: 'the last projection of a language model, from hidden states to one logit per vocabulary token' },
  { term: 'BF16', pattern: /\bBF16\b/, means: '16-bit brain floating point, the usual precision of mixed-precision training' },
  { term: 'E4M3 / E5M2', pattern: /\bE[45]M[23]\b/, means: 'the two FP8 formats: 4 exponent and 3 mantissa bits (precision), 5 and 2 (range)' },
  { term: 'compute capability', pattern: /compute capability|\bSM\s?\d/, means: "the GPU architecture's version: 8.9 Ada (RTX 4090, L40S), 9.0 Hopper (H100), 10.x Blackwell (B200); FP8 needs 8.9 or higher" },
  { term: 'zero_centered_gamma', pattern: /zero_centered_gamma/, means: 'a TE norm option for weights stored as w - 1, for norms whose forward scales by (1 + weight)' },
  { term: '_extra_state', pattern: /_extra_state/, means: 'the state_dict entry in which every TE module saves its FP8 scaling metadata' },
  { term: 'master weights', pattern: /master weights/, means: 'the copy of the parameters the optimizer updates; kept in FP32 so small updates are not rounded away' },
];

/** Glossary entries for the terms a text uses (at most `max`). */
export function termsIn(text: string, max = 4): Array<{ term: string; means: string }> {
  return GLOSSARY.filter((g) => g.pattern.test(text)).slice(0, max).map(({ term, means }) => ({ term, means }));
}

/** Extra lines the caller knows about (why no fix is offered; the fixes offered). */
export interface ExplainExtras {
  refusals?: readonly string[];
}

/** The sentences of an explanation, in reading order, deduplicated (and without any sentence of the message). */
function explanationSentences(message: string, e: Explanation | undefined, extras: ExplainExtras = {}): { facts: string[]; consequence: string[]; fix: string[]; refusals: string[] } {
  const seen = new Set(sentences(message).map(normal));
  const keep = (texts: readonly string[]): string[] => {
    const out: string[] = [];
    for (const t of texts) {
      for (const s of sentences(t)) {
        const key = normal(s);
        if (!key || seen.has(key)) continue;
        seen.add(key);
        out.push(s);
      }
    }
    return out;
  };
  return {
    facts: e ? e.facts.map((f) => keep([f]).join(' ')).filter(Boolean) : [],
    consequence: keep(e?.consequence ? [e.consequence] : []),
    fix: keep(e?.fix ? [e.fix] : []),
    refusals: keep(extras.refusals ?? []),
  };
}

function normal(sentence: string): string {
  return memoised(normalMemo, sentence, normalUncached);
}

function normalUncached(sentence: string): string {
  // "Not converted: X" and "No automatic fix: X" say the same X.
  return sentence.replace(/^(?:No automatic fix|Not converted|No FP8 autocast wrap)[^:]{0,20}:\s*/i, '').toLowerCase().replace(/[^a-z0-9%=.]+/g, ' ').replace(/\.$/, '').trim();
}

/** The hover card for one finding: facts, consequence, what the fix does, why no fix is offered, terms, rule link. */
export function explanationMarkdown(finding: Pick<Finding, 'code' | 'message' | 'explanation'>, extras: ExplainExtras = {}): string {
  const parts = explanationSentences(finding.message, finding.explanation, extras);
  const code: RuleCode = finding.code;
  const out: string[] = [`**${code} · ${RULES[code].rule}**`];
  if (parts.facts.length) out.push(parts.facts.map((f) => `- ${escapeMarkdown(f)}`).join('\n'));
  if (parts.consequence.length) out.push(`**Why it matters:** ${escapeMarkdown(parts.consequence.join(' '))}`);
  if (parts.fix.length) out.push(`**The fix:** ${escapeMarkdown(parts.fix.join(' '))}`);
  if (parts.refusals.length) out.push(`**No automatic fix:** ${escapeMarkdown(parts.refusals.map((r) => r.replace(/^(?:No automatic fix|Not converted):\s*/, '')).join(' '))}`);
  const terms = termsIn([finding.message, ...parts.facts, ...parts.consequence, ...parts.fix].join(' '));
  if (terms.length) out.push(`*Terms:* ${terms.map((t) => `**${t.term}**: ${t.means}.`).join(' ')}`);
  out.push(`[${code} rule page](${ruleDocUrl(code)})`);
  return out.join('\n\n');
}

/** The explanation as plain sentences (the CLI's JSON `explanation`, SARIF's fullDescription-like text). */
export function explanationText(finding: Pick<Finding, 'message' | 'explanation'>, extras: ExplainExtras = {}): string {
  const parts = explanationSentences(finding.message, finding.explanation, extras);
  return [...parts.facts, ...parts.consequence, ...parts.fix, ...parts.refusals].join(' ');
}

/** Markdown special characters in prose that would otherwise format (`*`, `_` in names such as `_extra_state`). */
function escapeMarkdown(text: string): string {
  // Inline code stays as written; elsewhere escape the characters that start emphasis.
  return text.split(/(`[^`]*`)/).map((part, i) => (i % 2 ? part : part.replace(/([*_<>])/g, '\\$1'))).join('');
}
