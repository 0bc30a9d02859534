/**
 * The FP8 fallback wrapper (DESIGN.md, "The FP8 fallback wrapper"): one block per file that imports TE if it can,
 * decides once whether FP8 runs here, logs that choice, and offers layer and autocast factories that give te.* / TE
 * autocast on FP8 hardware and torch.nn / BF16 autocast everywhere else. Inserting it also routes the file's existing
 * TE uses through it (moving bare TE imports into its try block), so the file imports and runs without TE.
 */
import type { ModelIR } from '../analysis/ir';
import { insert, replace, type TextEdit } from './edits';
import { constructorSite } from './convert';
import { afterImportsOffset, torchName } from './imports';
import { indentUnit } from './indent';
import { statementAt, statementText, type Statement } from './source';
import { recipeExpression, recipeLabel } from './te-api';
import type { FixContext } from './types';

/** First line of the block: how fixes (and people) recognise it (defined with the analysis, which skips the block). */
export { WRAPPER_MARKER } from '../analysis/known';
import { WRAPPER_END_MARKER, WRAPPER_MARKER, wrapperRanges } from '../analysis/known';

export const CONTEXT_FACTORY = 'fp8_autocast_context';

/** Whether the file already has the wrapper (its marker, or its functions written by hand). */
export function hasWrapper(text: string): boolean {
  return text.includes(WRAPPER_MARKER) || /^def (fp8_available|fp8_autocast_context)\s*\(/m.test(text);
}

/** The local name the wrapper binds transformer_engine.pytorch to: `te`, unless the file uses `te` for another module. */
export function wrapperTeName(ir: ModelIR): string {
  const clash = ir.imports.some((b) => b.local === 'te' && b.target !== 'transformer_engine.pytorch');
  return clash ? 'te_pytorch' : 'te';
}

/** The wrapper's Python source. `movedImports` are the file's bare TE imports, now guarded inside its try block. */
export function wrapperSource(ctx: FixContext, movedImports: string[], movedNames: string[]): string {
  const te = wrapperTeName(ctx.ir);
  const modern = ctx.api === 'modern';
  const importTorch = torchName(ctx.ir) === 'torch' ? '' : 'import torch\n';
  // The file may import contextlib already (a context factory of its own): once is enough.
  const importContextlib = ctx.ir.imports.some((b) => b.local === 'contextlib' && b.target === 'contextlib') ? '' : 'import contextlib\n\n';
  const tryImports = [`import transformer_engine.pytorch as ${te}`, 'from transformer_engine.common import recipe as te_recipe', ...movedImports]
    .filter((line, i, all) => all.indexOf(line) === i);
  const noneNames = [te, 'te_recipe', ...movedNames].filter((n, i, all) => all.indexOf(n) === i);
  const check = modern
    ? `        ok, reason = ${te}.is_fp8_available(return_reason=True)`
    : '        from transformer_engine.pytorch.fp8 import check_fp8_support\n\n        ok, reason = check_fp8_support()';
  const autocast = modern
    ? `${te}.autocast(enabled=enabled, recipe=recipe or FP8_RECIPE)`
    : `${te}.fp8_autocast(enabled=enabled, fp8_recipe=recipe or FP8_RECIPE)`;
  // TE >= 2.9 names the norms' dtype argument `dtype` (params_dtype is a deprecated alias); older TE only knows params_dtype.
  const normKwargs = modern ? '_pl_norm_kwargs(kwargs)' : 'kwargs';
  const normHelper = modern
    ? `

def _pl_norm_kwargs(kwargs):
    """te.LayerNorm / te.RMSNorm (TE >= 2.9) take dtype= where te.Linear takes params_dtype=."""
    kwargs = dict(kwargs)
    if "params_dtype" in kwargs:
        kwargs["dtype"] = kwargs.pop("params_dtype")
    return kwargs
`
    : '';
  return `${WRAPPER_MARKER}
# FP8 through Transformer Engine where this machine supports it, BF16 everywhere else (no TE, no GPU, A100...).
# fp8_linear / fp8_layernorm / fp8_rmsnorm build te.* layers or their torch.nn twins; run the forward pass and the
# loss under \`with ${CONTEXT_FACTORY}():\` and call backward() after the block.
${importContextlib}${importTorch}try:
${tryImports.map((l) => `    ${l}`).join('\n')}
except ImportError as _pl_error:  # not installed, or a build that does not match this torch/CUDA
${noneNames.map((n) => `    ${n} = None`).join('\n')}
    _PL_TE_MISSING = (
        "Transformer Engine not installed" if isinstance(_pl_error, ModuleNotFoundError)
        else "Transformer Engine failed to import: %s" % _pl_error
    )
else:
    _PL_TE_MISSING = None

# The recipe, defined once: every FP8 autocast region of this file uses it unless given another.
FP8_RECIPE = ${recipeExpression(ctx.settings, 'te_recipe')} if te_recipe is not None else None
_PL_FP8_STATE = None


def _pl_fp8_support():
    if ${te} is None:
        if torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9):
            return False, _PL_TE_MISSING + " (this GPU supports FP8: pip install transformer_engine[pytorch])"
        return False, _PL_TE_MISSING
    if not torch.cuda.is_available():
        return False, "no CUDA device"
    try:
${check}
    except Exception as err:  # a driver or runtime mismatch must not stop training: fall back to BF16
        return False, "FP8 check failed: %s" % err
    return bool(ok), str(reason or "")


def fp8_available():
    """(True, "") when this process runs FP8 through Transformer Engine, else (False, reason). Logs the choice once."""
    global _PL_FP8_STATE
    if _PL_FP8_STATE is None:
        _PL_FP8_STATE = _pl_fp8_support()
        if _PL_FP8_STATE[0]:
            major, minor = torch.cuda.get_device_capability()
            print("Running in FP8 mode on %s (sm_%d%d), recipe ${recipeLabel(ctx.settings)}" % (torch.cuda.get_device_name(), major, minor), flush=True)
        else:
            print("Running in BF16 fallback: %s" % _PL_FP8_STATE[1], flush=True)
    return _PL_FP8_STATE


def _pl_torch_kwargs(kwargs):
    """te.* keyword arguments as torch.nn takes them: params_dtype is dtype there, TE-only options have no twin."""
    out = {k: v for k, v in kwargs.items() if k in ("device", "dtype")}
    if kwargs.get("params_dtype") is not None:
        out["dtype"] = kwargs["params_dtype"]
    return out
${normHelper}

def fp8_linear(in_features, out_features, bias=True, **kwargs):
    """te.Linear when FP8 runs here, else torch.nn.Linear of the same shape."""
    if fp8_available()[0]:
        return ${te}.Linear(in_features, out_features, bias=bias, **kwargs)
    return torch.nn.Linear(in_features, out_features, bias=bias, **_pl_torch_kwargs(kwargs))


def fp8_layernorm(normalized_shape, eps=1e-5, **kwargs):
    """te.LayerNorm when FP8 runs here, else torch.nn.LayerNorm."""
    if fp8_available()[0]:
        return ${te}.LayerNorm(normalized_shape, eps=eps, **${normKwargs})
    return torch.nn.LayerNorm(normalized_shape, eps=eps, **_pl_torch_kwargs(kwargs))


class _PLRMSNorm(torch.nn.Module):
    """RMSNorm for torch < 2.4 (no torch.nn.RMSNorm) and for the (1 + weight) variant."""

    def __init__(self, normalized_shape, eps=1e-5, zero_centered_gamma=False, device=None, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.zero_centered_gamma = zero_centered_gamma
        init = torch.zeros if zero_centered_gamma else torch.ones
        self.weight = torch.nn.Parameter(init(shape, device=device, dtype=dtype))

    def forward(self, x):
        dims = tuple(range(-self.weight.dim(), 0))
        gamma = self.weight + 1 if self.zero_centered_gamma else self.weight
        return x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + self.eps) * gamma


def fp8_rmsnorm(normalized_shape, eps=1e-5, **kwargs):
    """te.RMSNorm when FP8 runs here, else torch.nn.RMSNorm (or a built-in one on older torch)."""
    if fp8_available()[0]:
        return ${te}.RMSNorm(normalized_shape, eps=eps, **${normKwargs})
    zero_centered = bool(kwargs.get("zero_centered_gamma", False))
    if hasattr(torch.nn, "RMSNorm") and not zero_centered:
        return torch.nn.RMSNorm(normalized_shape, eps=eps, **_pl_torch_kwargs(kwargs))
    return _PLRMSNorm(normalized_shape, eps=eps, zero_centered_gamma=zero_centered, **_pl_torch_kwargs(kwargs))


def ${CONTEXT_FACTORY}(enabled=True, recipe=None):
    """TE FP8 autocast when FP8 runs here, else BF16 torch.autocast. enabled=False keeps a region out of FP8."""
    if fp8_available()[0]:
        return ${autocast}
    if not enabled:
        return contextlib.nullcontext()
    if torch.cuda.is_available():
        # GPUs without BF16 (V100, T4) get FP16 autocast rather than an error.
        return torch.autocast("cuda", dtype=torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16)
    return torch.autocast("cpu", dtype=torch.bfloat16)
${WRAPPER_END_MARKER}
`;
}

/** A bare (unguarded, top-level) TE import statement the wrapper takes over. */
interface BareImport {
  stmt: Statement;
  text: string;
  names: string[];
}

function bareTeImports(ctx: FixContext): BareImport[] {
  const out = new Map<Statement, BareImport>();
  for (const b of ctx.ir.imports) {
    if (b.guarded || !b.target.startsWith('transformer_engine')) continue;
    const stmt = statementAt(ctx.model, b.span.startOffset);
    if (!stmt || stmt.parent || stmt.isHeader) continue;
    const text = statementText(ctx.model, stmt);
    if (!/^(import|from)\s/.test(text) || text.includes(';')) continue;
    const entry = out.get(stmt) ?? { stmt, text: text.replace(/\s*\\?\r?\n\s*/g, ' '), names: [] };
    entry.names.push(b.local);
    out.set(stmt, entry);
  }
  return [...out.values()];
}

/** What routing the file through the wrapper does: the edits and the TE uses it could not route. */
export interface WrapperPlan {
  edits: TextEdit[];
  /** The block is inserted by these edits (false: it existed). */
  inserted: boolean;
  /** te.* layers and autocast regions now going through the factories. */
  rewired: number;
  /** TE uses left as they were (te.TransformerLayer, te.LayerNormMLP...): they still need TE to run. */
  remainingTeUses: string[];
}

/** The constructor name without its module prefix (`te.pytorch.Linear` -> `Linear`). */
function baseName(callee: string): string {
  return callee.split('.').pop() ?? callee;
}

const TE_FACTORY_BY_CLASS: Record<string, string> = { Linear: 'fp8_linear', LayerNorm: 'fp8_layernorm', RMSNorm: 'fp8_rmsnorm' };

/**
 * Inserts the wrapper (once) and routes the file's TE through it: bare TE imports move into its try block, te.Linear /
 * LayerNorm / RMSNorm constructions call the factories, FP8 autocast regions call fp8_autocast_context(), and recipe
 * assignments evaluate only when TE imported.
 */
export function planWrapper(ctx: FixContext): WrapperPlan {
  const { ir, text } = ctx;
  const edits: TextEdit[] = [];
  const remaining: string[] = [];
  let rewired = 0;
  const teName = wrapperTeName(ir);

  const moved = ctx.hasWrapper ? [] : bareTeImports(ctx);
  for (const imp of moved) edits.push(replace(imp.stmt.lineStart, imp.stmt.lineEnd, ''));
  if (ctx.hasWrapper) {
    // The wrapper binds TE itself: a bare `import transformer_engine.pytorch as te` next to it only defeats the fallback.
    for (const b of ir.imports) {
      if (b.guarded || b.target !== 'transformer_engine.pytorch' || b.local !== teName) continue;
      const stmt = statementAt(ctx.model, b.span.startOffset);
      if (stmt && !stmt.parent && /^import\s+transformer_engine\.pytorch\s+as\s+\w+\s*$/.test(statementText(ctx.model, stmt))) {
        edits.push(replace(stmt.lineStart, stmt.lineEnd, ''));
      }
    }
  }

  // A layer built through the wrapper's own factory (`fp8_linear(...)`) is seen at the te.Linear inside the wrapper:
  // it is routed already, and rewriting that te.Linear would make the factory call itself.
  const own = ctx.hasWrapper ? wrapperRanges(text) : [];
  for (const layer of ir.layers) {
    if (!layer.isTe) continue;
    const site = constructorSite(text, layer);
    if (own.some(([a, b]) => site.calleeStart >= a && site.calleeStart < b)) continue;
    const factory = TE_FACTORY_BY_CLASS[baseName(layer.resolved)];
    if (!factory) { remaining.push(layer.constructor); continue; }
    edits.push(replace(site.calleeStart, site.calleeEnd, factory));
    rewired++;
  }

  for (const region of ir.autocastRegions) {
    const args: string[] = [];
    if (region.disabled) args.push('enabled=False');
    else if (region.args.enabled !== undefined && region.args.enabled.trim() !== 'True') args.push(`enabled=${region.args.enabled.trim()}`);
    const recipe = (region.args.recipe ?? region.args.fp8_recipe)?.trim();
    if (recipe) args.push(`recipe=${/^[A-Za-z_][\w.]*$/.test(recipe) ? recipe : `(${recipe}) if ${teName} is not None else None`}`);
    edits.push(replace(region.callSpan.startOffset, region.callSpan.endOffset, `${CONTEXT_FACTORY}(${args.join(', ')})`));
    rewired++;
  }

  // `fp8_recipe = DelayedScaling(...)` runs at import time: without TE its name is None, so evaluate it only with TE.
  for (const recipe of ir.recipes) {
    const stmt = statementAt(ctx.model, recipe.span.startOffset);
    if (!stmt) continue;
    const s = statementText(ctx.model, stmt);
    const rhsStart = stmt.start + (/^[A-Za-z_][\w.]*\s*(:[^=]+)?=\s*/.exec(s)?.[0].length ?? -1);
    if (rhsStart >= stmt.start && rhsStart === recipe.span.startOffset && recipe.span.endOffset === stmt.end) {
      edits.push(insert(recipe.span.endOffset, ` if ${teName} is not None else None`));
    }
  }

  const inserted = !ctx.hasWrapper;
  if (inserted) {
    const at = afterImportsOffset(ctx.model);
    const before = at > 0 && text[at - 1] !== '\n' ? '\n' : '';
    // The block is written with 4-space indentation; a tab- or 2-space-indented file gets its own unit.
    const unit = indentUnit(ctx.model);
    const block = wrapperSource(ctx, moved.map((m) => m.text), moved.flatMap((m) => m.names))
      .replace(/^((?: {4})+)/gm, (ws) => unit.repeat(ws.length / 4));
    // Two blank lines around the block (PEP 8 around top-level definitions), counting those already there.
    const blankAfter = /^(?:[ \t]*\r?\n)*/.exec(text.slice(at))![0].split('\n').length - 1;
    edits.push(insert(at, `${before}\n\n${block}${'\n'.repeat(Math.max(0, 2 - blankAfter))}`));
  }
  return { edits, inserted, rewired, remainingTeUses: remaining };
}
