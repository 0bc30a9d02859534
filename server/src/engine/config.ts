/**
 * The project's configuration: the `[tool.precision-lens]` table of the nearest pyproject.toml that has one, found by
 * walking up from the analysed file (as ruff finds `[tool.ruff]`). One loader for the CLI and the language server;
 * it yields a partial settings object in the shape `resolveSettings` reads, so both end up with the one settings type.
 *
 *   [tool.precision-lens]
 *   te-api = "modern"              # auto | legacy | modern (TE >= 2.9)
 *   target-gpu = "hopper"          # any | ada | hopper | blackwell
 *   recipe = "DelayedScaling"      # fp8-format = "HYBRID"
 *   fallback-module = "fp8_fallback"
 *   ignore = ["PL402"]             # rules turned off
 *   [tool.precision-lens.rules]    # per rule (code or name): off | error | warning | information | hint
 *   PL201 = "error"
 *   [tool.precision-lens.dims]     # sizes the analysis cannot see: name = size, or a list of sizes (presets)
 *   hidden_size = 4096
 *   tokens-per-step = 16384        # micro-batch x sequence: the predicted FP8 gain's rows (docs/gain.md)
 *   convert-losing-layers = false  # convert-all / --fix leave layers predicted to lose in BF16
 *   exclude / extend-exclude = ["legacy/**"]        # globs relative to this file's folder (exclude replaces the defaults)
 *   [tool.precision-lens.per-file-ignores]          # glob = codes (or "ALL")
 *   "tests/**" = ["PL401"]
 */
import { readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parse } from 'smol-toml';
import { isRuleCode, RULE_CODES, RULES, type RuleCode } from '../../../common/codes';

/** What `[tool.precision-lens]` says, as a partial raw settings object, and what was wrong with it. */
export interface ProjectConfig {
  /** The pyproject.toml it came from. */
  path: string;
  settings: Record<string, unknown>;
  /** One sentence each: a TOML syntax error, an unknown key, a value out of range. */
  problems: string[];
}

const LEVELS = ['off', 'error', 'warning', 'information', 'hint'];
const CHOICES: Record<string, readonly string[]> = {
  'te-api': ['auto', 'legacy', 'modern'],
  'target-gpu': ['any', 'ada', 'hopper', 'blackwell'],
  recipe: ['DelayedScaling', 'Float8CurrentScaling', 'Float8BlockScaling', 'MXFP8BlockScaling'],
  'fp8-format': ['HYBRID', 'E4M3'],
};
const KEYS = new Set([...Object.keys(CHOICES), 'fallback-module', 'max-file-size', 'ignore', 'rules', 'severity', 'dims', 'exclude', 'extend-exclude', 'per-file-ignores', 'tokens-per-step', 'convert-losing-layers']);

function ruleCodeOf(key: string): RuleCode | undefined {
  const upper = key.toUpperCase();
  return isRuleCode(upper) ? upper : RULE_CODES.find((c) => RULES[c].rule === key);
}

function isTable(v: unknown): v is Record<string, unknown> {
  return !!v && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Date);
}

/** The `[tool.precision-lens]` table of a pyproject.toml text, or undefined when it has none. Never throws. */
export function projectConfigFromToml(text: string, path: string): ProjectConfig | undefined {
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (e) {
    // Only a file that mentions the table is ours to complain about.
    if (!text.includes('tool.precision-lens')) return undefined;
    const first = String((e as Error).message).split('\n')[0];
    return { path, settings: {}, problems: [`${path} is not valid TOML (${first}); [tool.precision-lens] is ignored.`] };
  }
  const tool = isTable(doc.tool) ? doc.tool : undefined;
  const table = tool && tool['precision-lens'];
  if (!isTable(table)) return undefined;
  const problems: string[] = [];
  const te: Record<string, unknown> = {};
  const settings: Record<string, unknown> = {};
  const rules: Record<string, string> = {};
  const project: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(table)) {
    if (!KEYS.has(key)) { problems.push(`Unknown key "${key}" in [tool.precision-lens] (known: ${[...KEYS].join(', ')}).`); continue; }
    const choices = CHOICES[key];
    if (choices) {
      if (typeof value !== 'string' || !choices.includes(value)) { problems.push(`${key} = ${JSON.stringify(value)} is not one of ${choices.join(', ')}.`); continue; }
      if (key === 'te-api') te.apiVersion = value;
      else if (key === 'recipe') te.recipe = value;
      else if (key === 'fp8-format') te.fp8Format = value;
      else settings.targetGpu = value;
    } else if (key === 'fallback-module') {
      if (typeof value === 'string') settings.fallbackModule = value; else problems.push('fallback-module must be a module name or a relative path.');
    } else if (key === 'tokens-per-step') {
      if (typeof value === 'number' && Number.isInteger(value) && value > 0) settings.tokensPerStep = value; else problems.push('tokens-per-step must be a positive integer (micro-batch x sequence length).');
    } else if (key === 'convert-losing-layers') {
      if (typeof value === 'boolean') settings.convertLosingLayers = value; else problems.push('convert-losing-layers must be true or false.');
    } else if (key === 'max-file-size') {
      if (typeof value === 'number' && value > 0) settings.maxFileSize = value; else problems.push('max-file-size must be a positive number of bytes.');
    } else if (key === 'ignore') {
      for (const item of Array.isArray(value) ? value : [value]) {
        const code = typeof item === 'string' ? ruleCodeOf(item) : undefined;
        if (code) rules[code] = 'off'; else problems.push(`ignore: unknown rule ${JSON.stringify(item)}.`);
      }
    } else if (key === 'rules' || key === 'severity') {
      if (!isTable(value)) { problems.push(`${key} must be a table of rule = level.`); continue; }
      for (const [rule, level] of Object.entries(value)) {
        const code = ruleCodeOf(rule);
        if (!code) problems.push(`${key}: unknown rule "${rule}".`);
        else if (typeof level !== 'string' || !LEVELS.includes(level)) problems.push(`${key}.${rule} = ${JSON.stringify(level)} is not one of ${LEVELS.join(', ')}.`);
        else rules[code] = level;
      }
    } else if (key === 'dims') {
      if (isTable(value)) settings.dims = { ...value }; else problems.push('dims must be a table of name = size.');
    } else if (key === 'exclude' || key === 'extend-exclude') {
      if (Array.isArray(value) && value.every((g) => typeof g === 'string')) project[key === 'exclude' ? 'exclude' : 'extendExclude'] = value as string[];
      else problems.push(`${key} must be a list of file globs.`);
    } else if (key === 'per-file-ignores') {
      if (!isTable(value)) { problems.push('per-file-ignores must be a table of "glob" = [codes].'); continue; }
      const table: Record<string, string[]> = {};
      for (const [glob, list] of Object.entries(value)) {
        const codes: string[] = [];
        for (const item of Array.isArray(list) ? list : [list]) {
          const code = typeof item === 'string' ? (item.toUpperCase() === 'ALL' ? 'ALL' : ruleCodeOf(item)) : undefined;
          if (code) codes.push(code); else problems.push(`per-file-ignores."${glob}": unknown rule ${JSON.stringify(item)}.`);
        }
        table[glob] = codes;
      }
      project.perFileIgnores = table;
    }
  }
  if (Object.keys(project).length) settings.project = { root: dirname(path), extendExclude: [], perFileIgnores: {}, ...project };
  if (Object.keys(te).length) settings.te = te;
  if (Object.keys(rules).length) settings.rules = rules;
  return { path, settings, problems };
}

const cache = new Map<string, { mtimeMs: number; config: ProjectConfig | undefined }>();

function readConfigAt(dir: string): ProjectConfig | undefined | null {
  const path = join(dir, 'pyproject.toml');
  let mtimeMs: number;
  try {
    const st = statSync(path);
    if (!st.isFile()) return null;
    mtimeMs = st.mtimeMs;
  } catch {
    return null;
  }
  const hit = cache.get(path);
  if (hit && hit.mtimeMs === mtimeMs) return hit.config;
  let config: ProjectConfig | undefined;
  try {
    config = projectConfigFromToml(readFileSync(path, 'utf8'), path);
  } catch (e) {
    config = { path, settings: {}, problems: [`${path} could not be read (${(e as NodeJS.ErrnoException).code ?? String(e)}).`] };
  }
  cache.set(path, { mtimeMs, config });
  return config;
}

/**
 * The nearest `[tool.precision-lens]` table at or above `startDir` (a pyproject.toml without the table does not stop
 * the walk). At most 64 levels; bounded and cached by file modification time.
 */
export function findProjectConfig(startDir: string): ProjectConfig | undefined {
  let dir = startDir;
  for (let i = 0; i < 64; i++) {
    const config = readConfigAt(dir);
    if (config) return config;
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
  return undefined;
}

/** Forgets cached pyproject.toml reads (the editor calls it when one changes). */
export function clearProjectConfigCache(): void {
  cache.clear();
}

/**
 * `over` laid over `base` (raw settings objects): the project's table wins over the editor's settings and is itself
 * overridden by command-line flags; `rules`, `te` and `dims` merge key by key.
 */
export function overlaySettings(base: unknown, over: Record<string, unknown> | undefined): Record<string, unknown> {
  const b = (isTable(base) ? base : {}) as Record<string, unknown>;
  if (!over) return { ...b };
  const out: Record<string, unknown> = { ...b, ...over };
  for (const key of ['rules', 'te', 'dims']) {
    if (isTable(b[key]) || isTable(over[key])) out[key] = { ...(isTable(b[key]) ? b[key] : {}), ...(isTable(over[key]) ? over[key] : {}) };
  }
  return out;
}
