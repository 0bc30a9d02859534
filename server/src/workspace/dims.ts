/**
 * Sizes from outside the analysed file, for the analysis (AnalysisOptions.dims): the user's declarations
 * (settings.dims: the `precisionLens.dims` setting and `[tool.precision-lens] dims` in pyproject.toml, merged into
 * the one settings field by the settings loader) and config files beside the code (config.json, params.json, YAML,
 * TOML with the usual size keys). The only module here that reads files; the analysis stays pure.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { PrecisionLensSettings } from '../../../common/settings';
import type { DimValue, ExternalDims } from '../analysis/ir';

/** Keys that name a model size in Hugging Face, Llama, litgpt, timm and Megatron configs. */
const SIZE_KEY = /^(hidden_size|intermediate_size|ffn_hidden_size|n_embd|n_inner|d_model|d_ff|d_kv|dim|hidden_dim|mlp_dim|ffn_dim|embed_dim|embedding_dim|num_attention_heads|num_key_value_heads|n_head|n_heads|n_kv_heads|num_heads|head_dim|head_size|n_layer|n_layers|num_hidden_layers|depth|vocab_size|padded_vocab_size|encoder_embed_dim|decoder_embed_dim|encoder_ffn_embed_dim|decoder_ffn_embed_dim|kv_channels|multiple_of|patch_size|image_size|num_channels|n_state|n_audio_state|n_text_state|n_mels|width|mlp_ratio)$/;

const CONFIG_FILE = /^(config|params|model_config|model_args|hparams|args)\.json$|\.(ya?ml|toml)$/;
const MAX_FILES = 12;
const MAX_BYTES = 256 * 1024;

/** The user's declarations as external dims. */
export function declaredDims(settings: PrecisionLensSettings): ExternalDims {
  const out: ExternalDims = {};
  for (const [name, v] of Object.entries(settings.dims ?? {})) {
    const list = Array.isArray(v) ? v : [v];
    out[name] = list.map((value) => ({ value, source: { kind: 'declared', detail: `declared: ${name} = ${value} (precisionLens.dims / [tool.precision-lens] dims)` } }));
  }
  return out;
}

function add(out: ExternalDims, key: string, value: unknown, file: string): void {
  if (!SIZE_KEY.test(key) || typeof value !== 'number' || !Number.isInteger(value) || value <= 0) return;
  const v: DimValue = { value, source: { kind: 'config-file', detail: `${key}: ${value} in ${file}` } };
  const list = (out[key] ??= []);
  if (!list.some((x) => x.value === value) && list.length < 16) list.push(v);
}

/** Numbers under size keys anywhere in a JSON document (nested configs: text_config, vision_config). */
function fromJson(out: ExternalDims, obj: unknown, file: string, depth = 0): void {
  if (!obj || typeof obj !== 'object' || depth > 4) return;
  for (const [k, v] of Object.entries(obj as Record<string, unknown>)) {
    if (typeof v === 'number') add(out, k, v, file);
    else if (v && typeof v === 'object' && !Array.isArray(v)) fromJson(out, v, file, depth + 1);
  }
}

/** `key: 1024` (YAML) and `key = 1024` (TOML) lines, at any indentation. */
function fromLines(out: ExternalDims, text: string, file: string): void {
  for (const m of text.matchAll(/^[ \t]*([A-Za-z_]\w*)[ \t]*[:=][ \t]*(\d[\d_]*)[ \t]*(?:#.*)?$/gm)) {
    add(out, m[1], Number(m[2].replace(/_/g, '')), file);
  }
}

/** Parses one config file's size keys (never throws: an unreadable or malformed file gives nothing). */
export function dimsOfConfigText(name: string, text: string): ExternalDims {
  const out: ExternalDims = {};
  if (name.endsWith('.json')) {
    try { fromJson(out, JSON.parse(text), name); } catch { /* malformed: nothing */ }
  } else if (name !== 'pyproject.toml' && !/^\.|workflow|docker|compose|pre-commit|mkdocs|environment/i.test(name)) fromLines(out, text, name);
  return out;
}

const cache = new Map<string, { key: string; dims: ExternalDims; at: number }>();
/** A directory is listed again at most this often (the editor analyses on every keystroke). */
const RECHECK_MS = 2000;

/** Size keys of the config files in a directory (cached by the directory's listing and the files' mtimes). */
export function configFileDims(dir: string): ExternalDims {
  const now = Date.now();
  const recent = cache.get(dir);
  if (recent && now - recent.at < RECHECK_MS) return recent.dims;
  let names: string[];
  try { names = readdirSync(dir).filter((n) => CONFIG_FILE.test(n)).sort().slice(0, MAX_FILES); } catch {
    // No such directory (an untitled or virtual document's path): asked again at most every RECHECK_MS too.
    cache.set(dir, { key: '', dims: {}, at: now });
    return {};
  }
  const stats = names.map((n) => { try { const s = statSync(join(dir, n)); return s.isFile() && s.size <= MAX_BYTES ? `${n}:${s.mtimeMs}` : ''; } catch { return ''; } });
  const key = stats.join('|');
  const hit = cache.get(dir);
  if (hit && hit.key === key) { hit.at = now; return hit.dims; }
  const dims: ExternalDims = {};
  names.forEach((n, i) => {
    if (!stats[i]) return;
    let text: string;
    try { text = readFileSync(join(dir, n), 'utf8'); } catch { return; }
    for (const [k, vs] of Object.entries(dimsOfConfigText(n, text))) for (const v of vs) add(dims, k, v.value, n);
  });
  if (cache.size > 500) cache.clear();
  cache.set(dir, { key, dims, at: now });
  return dims;
}

/** Everything known from outside for the file at `path`: declarations first, then its directory's config files. */
export function dimsForFile(settings: PrecisionLensSettings, path: string | undefined): ExternalDims {
  const declared = declaredDims(settings);
  if (!path || !basename(path).endsWith('.py')) return declared;
  const files = configFileDims(dirname(path));
  const out: ExternalDims = { ...files };
  for (const [k, v] of Object.entries(declared)) out[k] = [...v, ...(files[k] ?? [])];
  return out;
}
