/**
 * PL401: FP8 turned on without a fallback: an unguarded `import transformer_engine` raises ImportError wherever TE is
 * absent, and FP8 autocast without a capability check raises on GPUs below SM 8.9 (A100, V100, RTX 3090).
 * PL402: the choice between FP8 and BF16 is made but never logged, so a run silently trains in the other precision.
 */
import type { ModelIR } from '../analysis/ir';
import type { Finding, RuleContext, RuleModule } from './types';

/** An autocast whose `enabled=` is an expression (a flag, a check) is already conditional. */
function regionIsConditional(args: Record<string, string>): boolean {
  const enabled = args.enabled;
  // `te.autocast(**kwargs)`: whether it is enabled is decided where the dict is built, not known here.
  if (enabled === undefined && (args['**'] !== undefined || args['*'] !== undefined)) return true;
  return enabled !== undefined && enabled.trim() !== 'True';
}

function fp8Used(ir: ModelIR): boolean {
  return ir.layers.some((l) => l.isTe) || ir.autocastRegions.some((r) => !r.disabled);
}

export const fallbackRules: RuleModule = {
  codes: ['PL401', 'PL402'],
  check({ ir }: RuleContext): Finding[] {
    const findings: Finding[] = [];
    const hasCheck = ir.calls.some((c) => c.kind === 'fp8_check');
    // FP8 through a whole-model conversion (torchao, accelerate) fails the same way on GPUs without FP8 GEMMs.
    const conv = ir.fp8Conversions.find((c) => !/Accelerator/.test(c.callee) && !c.fallback);
    if (conv && !hasCheck && !ir.importsTe) {
      findings.push({
        code: 'PL401', span: conv.span, severity: 'warning', conversionIndex: ir.fp8Conversions.indexOf(conv),
        message: `${conv.callee} turns FP8 on with no capability check; convert only on GPUs with FP8`,
        explanation: {
          facts: ['On GPUs below compute capability 8.9 (A100, V100, RTX 3090) the first FP8 GEMM (torch._scaled_mm) raises.'],
          fix: 'Convert only when torch.cuda.get_device_capability() >= (8, 9), train in BF16 otherwise, and log which one runs.',
        },
      });
    }
    if (!ir.importsTe || !fp8Used(ir)) return findings;
    const enabledRegions = ir.autocastRegions.filter((r) => !r.disabled);
    // The FP8 fallback's own context (fp8_autocast_context) checks FP8 support itself and falls back to BF16: always
    // "enabled" as written, it is conditional where it runs. Counting it left a warning on the code our own fix wrote.
    const unconditional = enabledRegions.filter((r) => r.api !== 'fallback' && !regionIsConditional(r.args));
    const teImport = ir.imports.find((i) => i.target.startsWith('transformer_engine') && !i.guarded);

    if (ir.teImportUnguarded && teImport) {
      findings.push({
        code: 'PL401', span: teImport.span, severity: 'warning',
        message: 'Transformer Engine is imported unconditionally; import it in try/except and fall back to BF16',
        explanation: {
          facts: ['Without TE installed (a laptop, CI, an A100 box without the package) this file fails with ImportError before training starts.'],
          fix: 'The "Insert FP8 fallback wrapper" fix imports TE inside try/except ImportError and falls back to torch.nn layers and BF16 autocast.',
        },
      });
    } else if (!hasCheck && unconditional.length) {
      const region = unconditional[0];
      findings.push({
        code: 'PL401', span: region.callSpan, severity: 'warning', regionIndex: ir.autocastRegions.indexOf(region),
        message: 'FP8 autocast is always enabled; pass enabled= from an FP8 capability check',
        explanation: {
          facts: ['On GPUs below compute capability 8.9 (A100, V100, RTX 3090) TE raises "Device compute capability 8.9 or higher required for FP8 execution."'],
          fix: 'Check te.is_fp8_available() (TE >= 2.9) or check_fp8_support() and pass the result as enabled=, falling back to BF16; the quick fix brings in the FP8 fallback wrapper, which does this.',
        },
      });
    }

    if (hasCheck && !ir.calls.some((c) => c.kind === 'log_precision')) {
      const check = ir.calls.find((c) => c.kind === 'fp8_check')!;
      findings.push({
        code: 'PL402', span: check.span, severity: 'hint', callIndex: ir.calls.indexOf(check),
        message: 'FP8 support is checked but the chosen precision is never logged; log the mode once at start',
        explanation: {
          consequence: 'Where the run falls back to BF16 (missing TE, older GPU) the job looks like a slow FP8 run.',
          fix: 'Log the active mode once at start ("Running in FP8 mode on ..." / "Running in BF16 fallback: <reason>").',
          facts: [],
        },
      });
    }
    return findings;
  },
};
