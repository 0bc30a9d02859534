/**
 * Tensor-parallel conversions (PL106): fairscale's and Megatron's Column/RowParallelLinear become
 * te.Linear(parallel_mode=...) only with the same process group (tp_group / tp_size from the library's model-parallel
 * getters, sequence_parallel from a Megatron config) and the same communication: te.Linear's column mode returns the
 * rank's output shard and its row mode takes an already split input, so `gather_output=True` and
 * `input_is_parallel=False` are refused with the reason rather than dropped.
 */
import type { Layer, ModelIR } from '../analysis/ir';
import type { CallArgs } from './source';

export interface ParallelPlan {
  /** Arguments to append (`tp_group=fs_init.get_model_parallel_group()`). */
  extra: string[];
  /** Source arguments decided here: dropped without counting as a lost option. */
  handled: Set<string>;
  /** An import the getters need. */
  importLine?: string;
  refusal?: string;
}

type Library = 'fairscale' | 'megatron' | 'other';

function libraryOf(layer: Layer): Library {
  if (layer.resolved.includes('fairscale')) return 'fairscale';
  if (/megatron|tensor_parallel/.test(layer.resolved)) return 'megatron';
  return 'other';
}

interface Getters {
  prefix: string;
  importLine?: string;
}

const GETTER_MODULES: Record<Exclude<Library, 'other'>, { modules: string[]; fallback: Getters; group: string; size: string }> = {
  fairscale: {
    modules: ['fairscale.nn.model_parallel.initialize', 'fairscale.nn.model_parallel'],
    fallback: { prefix: 'fs_init.', importLine: 'import fairscale.nn.model_parallel.initialize as fs_init' },
    group: 'get_model_parallel_group', size: 'get_model_parallel_world_size',
  },
  megatron: {
    modules: ['megatron.core.parallel_state', 'megatron.core.mpu', 'megatron.mpu'],
    fallback: { prefix: 'parallel_state.', importLine: 'from megatron.core import parallel_state' },
    group: 'get_tensor_model_parallel_group', size: 'get_tensor_model_parallel_world_size',
  },
};

/** How the file reaches the library's model-parallel getters (its own import, or one to add). */
function getters(ir: ModelIR, lib: Exclude<Library, 'other'>): { group: string; size: string; importLine?: string } {
  const spec = GETTER_MODULES[lib];
  const byName = (fn: string) => ir.imports.find((b) => spec.modules.some((m) => b.target === `${m}.${fn}`))?.local;
  const g = byName(spec.group);
  const s = byName(spec.size);
  if (g && s) return { group: `${g}()`, size: `${s}()` };
  const mod = ir.imports.find((b) => spec.modules.includes(b.target));
  const top = ir.imports.find((b) => b.target === lib);
  const taken = ir.imports.some((b) => `${b.local}.` === spec.fallback.prefix);
  const via: Getters = mod ? { prefix: `${mod.local}.` } : top ? { prefix: `${top.local}.${spec.modules[0].slice(lib.length + 1)}.` }
    : taken ? { prefix: `${spec.modules[0]}.`, importLine: `import ${spec.modules[0]}` } : spec.fallback;
  return { group: `${via.prefix}${spec.group}()`, size: `${via.prefix}${spec.size}()`, importLine: via.importLine };
}

function value(call: CallArgs, name: string): string | undefined {
  return call.args.find((a) => a.name === name)?.value.trim();
}

/** The communication flags: kept (te.Linear does the same), or a refusal. */
function communication(layer: Layer, call: CallArgs, lib: Library, handled: Set<string>): string | undefined {
  const column = layer.teArgs?.parallel_mode?.includes('column') ?? /Column/.test(layer.constructor);
  if (column) {
    const gather = value(call, 'gather_output') ?? (lib === 'fairscale' ? 'True' : 'False');
    if (gather !== 'False') {
      return `gather_output=${gather} all-gathers the output across the tensor-parallel group, and te.Linear(parallel_mode="column") returns the rank's shard: pass gather_output=False where the next layer takes the shard (a row-parallel one), or keep this layer.`;
    }
    handled.add('gather_output');
  } else {
    const split = value(call, 'input_is_parallel') ?? (lib === 'fairscale' ? 'False' : undefined);
    if (split !== 'True') {
      return split === undefined
        ? 'whether its input is already split across the tensor-parallel group (input_is_parallel) is not written here; te.Linear(parallel_mode="row") needs it split.'
        : `input_is_parallel=${split} splits the input itself, and te.Linear(parallel_mode="row") expects it split already: pass input_is_parallel=True after a column-parallel layer, or keep this layer.`;
    }
    handled.add('input_is_parallel');
  }
  return undefined;
}

/** What a parallel linear needs to become te.Linear with the same sharding, or why it cannot. */
export function planParallel(ir: ModelIR, layer: Layer, call: CallArgs): ParallelPlan {
  const handled = new Set<string>();
  const extra: string[] = [];
  const lib = libraryOf(layer);
  const refusal = communication(layer, call, lib, handled);
  if (refusal) return { extra, handled, refusal };
  for (const [name, ok] of [['stride', '1'], ['is_expert', 'False'], ['disable_grad_reduce', 'False']] as const) {
    const v = value(call, name);
    if (v !== undefined && v !== ok) return { extra, handled, refusal: `${name}=${v} changes how the weight is sharded or reduced, which te.Linear does not take.` };
    handled.add(name);
  }
  handled.add('keep_master_weight_for_test');
  const config = value(call, 'config');
  if (config !== undefined) {
    handled.add('config');
    if (value(call, 'sequence_parallel') === undefined) extra.push(`sequence_parallel=${config}.sequence_parallel`);
    if (value(call, 'params_dtype') === undefined && value(call, 'dtype') === undefined) extra.push(`params_dtype=${config}.params_dtype`);
  }
  const written = value(call, 'tp_group');
  // Megatron's tp_group=None means its global tensor-parallel group: the getter names it.
  if (written === 'None') handled.add('tp_group');
  const group = written === 'None' ? undefined : written;
  if (value(call, 'tp_size') !== undefined && group !== undefined) return { extra, handled };
  if (group !== undefined) {
    const torch = ir.imports.find((b) => b.target === 'torch')?.local ?? 'torch';
    extra.push(`tp_size=${torch}.distributed.get_world_size(${group})`);
    return { extra, handled };
  }
  if (lib === 'other') {
    return { extra, handled, refusal: `its tensor-parallel group is unknown (${layer.constructor} is neither fairscale's nor Megatron's): without tp_group / tp_size te.Linear builds full-size weights; pass them.` };
  }
  const g = getters(ir, lib);
  extra.push(`tp_group=${g.group}`, `tp_size=${g.size}`);
  return { extra, handled, ...(g.importLine ? { importLine: g.importLine } : {}) };
}
