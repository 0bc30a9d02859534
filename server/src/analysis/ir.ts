/**
 * The model IR: what the analysis knows about one Python file. Pure data (JSON-serialisable), produced by
 * `analyzeTree` and consumed by rules, fixes, the CLI's `inspect` and the tests. Positions are 0-based lines and
 * UTF-16 columns (what web-tree-sitter reports for JS strings, and what LSP wants); `offset`s are UTF-16 indices
 * into the document text.
 */

export interface Span {
  startLine: number;
  startColumn: number;
  endLine: number;
  endColumn: number;
  startOffset: number;
  endOffset: number;
}

/** A name bound by an import, resolved to the dotted module path it stands for. */
export interface ImportBinding {
  /** The local name (`nn`, `te`, `L`). */
  local: string;
  /** What it means (`torch.nn`, `transformer_engine.pytorch`, `torch.nn.Linear`). */
  target: string;
  span: Span;
  /** Inside a try: block (a guarded import, e.g. for TE), or inside a function (imported when it runs). */
  guarded: boolean;
}

export type LayerKind = 'linear' | 'layernorm' | 'rmsnorm' | 'embedding' | 'conv' | 'parallel-linear' | 'other';
export type LayerRole = 'lm_head' | 'embedding' | 'attention' | 'mlp' | 'norm' | 'classifier' | 'router' | 'other';
export type Convertible = true | false | 'uncertain';

/** Where a dimension's value came from, in the order the analysis tries them (user declarations win). */
export type DimSourceKind =
  | 'literal' // written in the call: nn.Linear(768, 3072)
  | 'expression' // computed from module constants or locals in the file
  | 'default' // a parameter's default (callers may pass another value)
  | 'declared' // the user's precisionLens.dims setting or [tool.precision-lens] dims in pyproject.toml
  | 'construction-site' // where the class is built: ViT(dim=1024, mlp_dim=4096)
  | 'config-default' // a config class's field default (dataclass, class attribute)
  | 'config-preset' // a preset: a dict or config instance in a list of configurations
  | 'config-file' // config.json / YAML / TOML beside the code
  | 'argparse'; // parser.add_argument("--dim", default=512)

export interface DimSource {
  kind: DimSourceKind;
  /** Where exactly, for people: `ViT(dim=1024) at line 88`, `config.json beside the file`. */
  detail: string;
}

/** One possible value of a dimension among several (presets, construction sites that disagree). */
export interface DimValue {
  value: number;
  source: DimSource;
}

/** A dimension argument: its source text and, when statically known, its value. */
export interface Dim {
  text: string;
  value?: number;
  /** Why the value is unknown, or how it was found (`config.n_embd default 768`). */
  note?: string;
  /** Where `value` came from. */
  source?: DimSource;
  /** Several possible values (a list of presets, construction sites with different sizes): each with its source.
   *  `value` is then unset unless they all agree; the shape verdict holds for all of them or names the one that fails. */
  values?: DimValue[];
}

/**
 * Sizes known from outside the analysed file, by name (`hidden_size`, `dim`; a config field `config.hidden_size` is
 * looked up by its field name): the user's declarations, config files beside the code, other analysed files. Each
 * name may have several values (one per preset or file).
 */
export type ExternalDims = Record<string, DimValue[]>;

/**
 * One place another file builds a class (`ViT(dim=1024, mlp_dim=4096)` in train.py): its literal integer arguments,
 * read from that file's text outside the analysis. `null` marks a positional argument that is not a literal (later
 * positions are still known); `splat` a `*args` / `**kw`, after which nothing absent can be taken for the default.
 */
export interface ExternalSite {
  /** `train.py:12`: where the call is, as shown in the dims' source. */
  at: string;
  keywords: Record<string, number | null>;
  positional: (number | null)[];
  splat?: boolean;
}

/** Construction sites in other files, by the called class name. */
export type ExternalSites = Record<string, ExternalSite[]>;

/** A facet's state: `ok`, `fails`, or `guarded` (structure: decided at run time; shape: dims unknown where built,
 *  checked by the fallback module's factory when the layer is built). */
export type FacetState = 'ok' | 'fails' | 'guarded';

/** One fact of a verdict: its state, the sentence that says why, and the named check that established it. */
export interface FacetFact {
  state: FacetState;
  reason: string;
  check: string;
}

/**
 * The verdict in three independent facets. convertible = structure ok, role ok (not protected) and shape not fails;
 * 'uncertain' only when the structure is `guarded` (it depends on run time).
 *  - structure: can the te.* class represent this construction exactly (arguments, subclass forward, norm axis...);
 *  - role: whether the layer's role (lm_head, embedding, tie, classifier, router) keeps it in high precision;
 *  - shape: the FP8 GEMM rule on known dims (`ok` / `fails`), or `guarded` when the dims are unknown where built.
 */
export interface LayerFacets {
  structure: FacetFact;
  role: FacetFact & { role: LayerRole };
  shape: FacetFact;
}

export interface LayerArg {
  /** Keyword name, or undefined for a positional argument. */
  name?: string;
  /** Position among positional arguments (undefined for keywords). */
  index?: number;
  text: string;
  span: Span;
}

export interface Layer {
  /** The whole constructor call `nn.Linear(a, b)`. */
  span: Span;
  /** The callee expression as written (`nn.Linear`, `L`, `te.pytorch.Linear`, `MyLinear`). */
  constructor: string;
  /** The callee resolved through imports and local classes (`torch.nn.Linear`, `transformer_engine.pytorch.Linear`,
   *  or `local:RMSNorm` for a class defined in this file). */
  resolved: string;
  calleeSpan: Span;
  kind: LayerKind;
  /** Already a Transformer Engine module. */
  isTe: boolean;
  /** Attribute path it is stored under: `self.c_attn`, `transformer.wte`, `layers[*]`, `h[*].mlp`; '' if unknown. */
  name: string;
  /** The same path without a leading `self.` (`c_attn`, `transformer.wte`, `layers[*]`). */
  path?: string;
  /** The last attribute name of the path (`c_attn`, `wte`, `layers`). */
  attr?: string;
  /** For a local layer class (custom RMSNorm, Linear subclass): its name. */
  localClass?: string;
  /** For a layer built through a factory: the constructor call inside the factory (span is the factory call site). */
  constructionSpan?: Span;
  /** The class whose body (usually __init__) constructs it, if any. */
  ownerClass?: string;
  /** The function or method that constructs it. */
  ownerFunction?: string;
  args: LayerArg[];
  /** Argument list span including the parentheses. */
  argsSpan: Span;
  inFeatures?: Dim;
  outFeatures?: Dim;
  /** normalized_shape for norms. */
  normalizedShape?: Dim;
  /** Literal keyword values that matter: bias, elementwise_affine, eps, dtype, device... (source text). */
  options: Record<string, string>;
  role: LayerRole;
  /** Why this role (`vocabulary-sized output (config.vocab_size)`, `tied to transformer.wte`). */
  roleReasons: string[];
  /** Tied to an embedding through weight sharing. */
  tied: boolean;
  /** The tie is only declared (`_tied_weights_keys`), so it holds when the config ties word embeddings. */
  tiedByConfig?: boolean;
  convertible: Convertible;
  /** Human reasons for the verdict: each a full sentence. */
  reasons: string[];
  /** The te.* equivalent (`te.Linear`), when one exists. */
  teEquivalent?: string;
  /** Keyword arguments te.* would take (`params_dtype`, `zero_centered_gamma`, `parallel_mode`), source text values. */
  teArgs?: Record<string, string>;
  /** For (1+w) RMSNorm variants. */
  zeroCenteredGamma?: boolean;
  /** Shape rule: undefined when dims unknown; false with the failing dims in reasons. */
  shapeOk?: boolean;
  /** The verdict's three facets, each with its reason (set for every layer the analysis decides). */
  facets?: LayerFacets;
  /** Wrapped inside a container or comprehension (ModuleList, Sequential, loop...). */
  container?: 'ModuleList' | 'Sequential' | 'ModuleDict' | 'loop' | 'comprehension' | 'helper';
  /** Constructed by a local helper function (factory) rather than directly. */
  viaFactory?: string;
  /** Built by an imported function read as a Linear factory by its name (`make_linear(d, d)` from another module):
   *  the conversion keeps the call and converts what it returns (fp8_linear_like). */
  importedFactory?: boolean;
  /** Built by the project's FP8 fallback module (`fp8_linear(...)`): te.* where FP8 runs; the factory checks the
   *  shape rule when it builds the layer and keeps torch.nn where it fails. */
  viaFallback?: boolean;
  /** The class is chosen at run time, here is where: a parameter with a layer-class default (`the parameter
   *  norm_layer (partial(nn.LayerNorm, eps=1e-6) by default)`) or a local function returning layer classes. */
  classFrom?: string;
  /** The class is a parameter of the enclosing function whose default is one norm class (`norm_layer=nn.LayerNorm`,
   *  `partial(nn.LayerNorm, eps=1e-6)`): the conversion checks at run time that the class passed is that one
   *  (`fp8_layernorm_from(norm_layer, nn.LayerNorm, dim)`) and builds the class as written otherwise. */
  classParam?: { name: string; defaultClass: string };
  /** A Python condition the converted code checks where it builds the layer (`config.bias`, from `bias=config.bias`:
   *  te.LayerNorm always has a bias, so it is exact only while that holds): the fallback's `fp8_layernorm_or(lambda:
   *  <the call as written>, ..., when=config.bias)` builds te.* where FP8 runs and it holds, the layer as written
   *  otherwise. */
  convertsWhen?: string;
  /** A local Linear subclass whose forward te.Linear reproduces but torch.nn.Linear does not (it casts its weight to
   *  the input's dtype): the conversion keeps this class for the fallback without FP8 (the factory's fallback lambda). */
  fallbackKeepsClass?: string;
  /** A norm whose class calls its weight otherwise (torchtune's RMSNorm: `scale`): the conversion keeps that
   *  checkpoint key on the te.* norm (state-dict hooks) and keeps the class for the fallback without FP8. */
  weightName?: string;
  /** A Linear whose weight is stored [in, out] (transformers' Conv1D(nf, nx)): the conversion builds te.Linear(nx, nf)
   *  inside the fallback's fp8_conv1d_or wrapper, which keeps Conv1D's checkpoint keys and layout (state-dict hooks,
   *  the te.Linear under a child path), and the Conv1D as written where FP8 does not run. */
  transposedWeight?: boolean;
  /** The class is chosen at run time among classes that all convert the same way: each, as written, with its
   *  conversion (`nn.LayerNorm -> te.LayerNorm`). The verdict holds for every one of them. */
  classCandidates?: string[];
  /** Candidate norms that convert alike but default eps differently, each with its default: the conversion fits both
   *  only where the call passes eps. */
  classCandidatesEps?: string[];
  /** The te.* layer this torch.nn layer is the fallback of (the same attribute built as te.* in another branch). */
  fallbackFor?: string;
  /** Passed straight to a wrapper that reparametrises it (`quant_noise(nn.Linear(...))`). */
  wrappedBy?: string;
  /** When that wrapper leaves the module as it is (fairseq's quant_noise when p <= 0), as code where it is called:
   *  the conversion builds the te.* layer only then and the layer as written otherwise. */
  wrapperOff?: string;
  /** Built in one branch of a conditional whose other branch builds a te.* layer (`fp8_linear(d, h) if c else
   *  nn.Linear(d, h)`): that branch's callee. The torch.nn branch is its fallback, kept as it is. */
  alternativeOf?: string;
}

/** A class defined in the file. */
export interface ClassInfo {
  name: string;
  span: Span;
  bases: string[];
  /** Bases resolved through imports (`torch.nn.Module`, `torch.nn.Linear`, `local:Foo`). */
  resolvedBases: string[];
  /** What it behaves as, if it is a layer class: local subclass of nn.Linear, custom RMSNorm, etc. */
  layerKind?: LayerKind;
  /** How that was recognised (`subclass of torch.nn.Linear`, `name and RMS normalisation in forward`). */
  layerKindReason?: string;
  /** (1+w) RMSNorm / zero-centred gamma. */
  zeroCenteredGamma?: boolean;
  /** forward scales by (1 + weight) only under this condition (`self.add_unit_offset`): te.RMSNorm's
   *  zero_centered_gamma depends on how each layer is built. */
  zeroCenteredConditional?: string;
  /** A Linear/Embedding implemented from scratch (its own weight and GEMM or lookup), with the evidence. */
  ownImplementation?: string;
  /**
   * A norm class that normalises over the channel axis of NCHW tensors instead of the last one: `always` (forward
   * reduces over dim 1 or permutes around the norm; timm LayerNorm2d) or `option` (a `data_format="channels_first"`
   * option, ConvNeXt), with the evidence and the option's default.
   */
  channelAxis?: { when: 'always' | 'option'; evidence: string; optionDefault?: string };
  /** Parameters a local Linear class adds besides weight and bias (LoRA's `lora_A`, `lora_B`). */
  extraParams?: string[];
  /** What a local Linear class replaces its weight with (`bnb.nn.Params4bit`): a quantized weight type. */
  weightReplacedBy?: string;
  /** A local Linear class holding one matrix per expert or group (a 3-D weight): te.GroupedLinear territory. */
  grouped?: string;
  /** A norm class whose forward takes more than the tensor (a gated RMSNorm's `gate`). */
  extraInputs?: string[];
  /** A norm class with no learnable weight at all (no Parameter, no norm module inside): te.* norms always have one. */
  weightless?: boolean;
  /**
   * A norm class (or a local base of it) that builds its weight on some paths only and removes it on the others
   * (`self.register_parameter("weight", None)`, `self.weight = None`: OLMo's LayerNormBase, under its config): the line.
   */
  weightOptional?: string;
  /** A norm class whose scale parameter has another name than `weight` (`gain`): checkpoint keys change with te.*. */
  scaleName?: string;
  /** A norm class whose forward transforms its weight before scaling by it (`torch.exp(self.scale)[:, None, None]`,
   *  `self.g.clamp(min=0)`): the forward line that does. te.* multiplies by its weight as stored. */
  weightTransformed?: string;
  /** A local Linear / norm subclass whose forward does more than its library base, in words (`casts the weight to
   *  the input's dtype`): te.* and the fallback's torch.nn layer would not keep it. */
  forwardExtra?: string;
  /** `forward` method span, if any. */
  forwardSpan?: Span;
  /** Methods defined. */
  methods: string[];
  /** Dataclass-style config class: field defaults (`n_embd` -> `768`). */
  fieldDefaults: Record<string, string>;
}

/** TE's two autocast APIs, and the FP8 fallback's `fp8_autocast_context()` (TE autocast where FP8 runs). */
export type AutocastApi = 'fp8_autocast' | 'autocast' | 'fallback';

export interface CallSite {
  span: Span;
  /** Callee as written. */
  callee: string;
  /** Receiver of a method call (`loss` for `loss.backward()`), if any. */
  receiver?: string;
  text: string;
}

/** A `with te.fp8_autocast(...)` / `with te.autocast(...)` / `with fp8_autocast_context(...)` block. */
export interface AutocastRegion {
  /** The whole with statement. */
  span: Span;
  /** The context-manager call. */
  callSpan: Span;
  /** The with statement's body. */
  bodySpan: Span;
  api: AutocastApi;
  /** `enabled=False` literally: the region turns FP8 off (e.g. around the lm-head). */
  disabled: boolean;
  /** Keyword args as written (`fp8_recipe`, `recipe`, `enabled`, `fp8_group`). */
  args: Record<string, string>;
  /** Calls inside the body (direct statements and nested). */
  calls: CallSite[];
  /** `.backward()` calls inside the body. */
  backwardInside: CallSite[];
  /** Enclosing function, if any. */
  ownerFunction?: string;
}

export interface WeightTie {
  span: Span;
  text: string;
  /** Attribute paths on each side (`transformer.wte.weight`, `lm_head.weight`). */
  left: string;
  right: string;
  /** Owner layer names (`transformer.wte`, `lm_head`). */
  leftLayer: string;
  rightLayer: string;
  /** The class whose method ties `self.a.weight = self.b.weight` (both sides on self): only its layers are meant. */
  ownerClass?: string;
}

/** A weight-quantization stack (bitsandbytes / QLoRA, GPTQ, AWQ, torchao quantize_): it swaps nn.Linear itself. */
export interface QuantizationCall {
  span: Span;
  callee: string;
}

/** torchao / accelerate FP8 conversion calls. */
export interface Fp8ConversionCall {
  span: Span;
  callee: string;
  /** A module_filter_fn / filter_fqns / skip argument exists. */
  hasFilter: boolean;
  /** The filter's source text, if any. */
  filterText?: string;
  /** Whether that filter visibly excludes the lm-head (names it, or skips the last module). */
  filterExcludesHead: boolean;
  /**
   * The FP8 fallback's fp8_for_compile: torchao's conversion behind a run-time check of the GPU and torchao, the
   * lm-head and small layers kept in BF16 by the function itself (PL201 and PL401 have nothing to say about it).
   */
  fallback?: true;
}

/** A te.* recipe construction (DelayedScaling(...), Float8CurrentScaling(...)...). */
export interface RecipeCall {
  span: Span;
  recipe: string;
  args: Record<string, string>;
  argSpans: Record<string, Span>;
}

/** A call of interest that is not a layer (torch.compile, load_state_dict, .to(bfloat16), optimizer.step, ...). */
export interface NotableCall {
  span: Span;
  kind: 'compile' | 'load_state_dict' | 'cast_low_precision' | 'optimizer_ctor' | 'optimizer_step' | 'backward'
    | 'fp8_check' | 'te_deprecated' | 'float8_cast' | 'log_precision' | 'attention' | 'checkpoint' | 'float8_allgather' | 'fsdp1'
    | 'float8_precompute';
  callee: string;
  text: string;
  /** Keyword args as written (positional ones as `$0`, `$1`...). */
  args: Record<string, string>;
  /** Span of each argument in `args` (the whole `name=value` for keywords). */
  argSpans?: Record<string, Span>;
  /** Receiver of a method call (`model` for `model.half()`). */
  receiver?: string;
  ownerFunction?: string;
  /** Where that function is (its whole definition), for rules that read its text. */
  ownerSpan?: Span;
}

export interface ModelIR {
  /** Whether the file imports torch at all (diagnostics are only raised for such files). */
  importsTorch: boolean;
  importsTe: boolean;
  /** TE imported outside any try: block. */
  teImportUnguarded: boolean;
  imports: ImportBinding[];
  classes: ClassInfo[];
  layers: Layer[];
  autocastRegions: AutocastRegion[];
  /**
   * TE autocast contexts made outside a `with` of this file (`return te.autocast(...)` from a context factory,
   * `stack.enter_context(te.fp8_autocast(...))`) and not disabled: the training step enters them elsewhere.
   */
  autocastContexts: Span[];
  weightTies: WeightTie[];
  fp8Conversions: Fp8ConversionCall[];
  /** Weight-quantization stacks used in the file (te.* layers would leave them). */
  quantization: QuantizationCall[];
  recipes: RecipeCall[];
  calls: NotableCall[];
  /** Names bound to a vocabulary size (`vocab_size`, `config.vocab_size`, `ntoken`). */
  vocabNames: string[];
  /** Post-training quantization for inference (ModelOpt, torchao quantize_), its saves and exports (ptq.ts). */
  ptq: PtqFacts;
  /** The parse had ERROR/MISSING nodes: analysis is best-effort. */
  hasSyntaxErrors: boolean;
  /** The first ERROR or MISSING node of the parse, when there is one: the analysis beyond it is partial. */
  syntaxError?: Span;
  /** Set when the analysis itself failed on this input (the IR is then empty); never thrown. */
  analysisError?: string;
  /** Set when the analysis stopped at its work budget: the IR holds what was found up to there, and this says so. */
  incomplete?: string;
}

/** Element type of an FP8 quantizer: E4M3 (the inference format) or E5M2 (range for gradients). */
export type PtqElement = 'e4m3' | 'e5m2';

/** A PTQ config as the analysis could read it: a library's named config, changed or not, or a literal. */
export interface PtqConfig {
  text: string;
  span: Span;
  /** The catalogue config it starts from (`FP8_DEFAULT_CFG`, `Float8DynamicActivationFloat8WeightConfig`). */
  base?: string;
  /** Format label (`FP8 per-tensor`); undefined when unknown. */
  format?: string;
  /** Uses an FP8 element type; undefined when the analysis cannot tell. */
  fp8?: boolean;
  weights?: PtqElement;
  activations?: PtqElement;
  /** Where the file chooses E5M2 for weights or activations. */
  e5m2At?: Span;
  /** static: scales come from calibration data; dynamic: from each tensor; weight-only: no activation scales. */
  scales?: 'static' | 'dynamic' | 'weight-only';
  kvCache: boolean;
  /** ModelOpt wildcards switched off (`{"enable": False}`), the library defaults the config merges included. */
  disabled: string[];
  /** What the analysis could not follow (a config built by a call, read from a file), if anything. */
  opaque?: string;
  /** Statements the config was read from (its assignment, the entries added to it). */
  evidence: Span[];
  /** GPU families that run the format, and what they need, from the catalogue. */
  gpus?: string[];
  needs?: string;
  /** That need as a compute-capability test (`>= min`, major equal to `major` when set), for a runtime guard. */
  sm?: { min: [number, number]; major?: number };
}

export interface PtqCalibrationSize {
  count: number;
  unit: 'samples' | 'batches';
  /** The loader's batch size, when the file sets it; samples = count * batchSize for batches. */
  batchSize?: number;
  text: string;
  span: Span;
}

/** The calibration loop given to the quantizer (ModelOpt forward_loop). */
export interface PtqForwardLoop {
  text: string;
  span: Span;
  /** The function it names, when it is defined in the file. */
  fnName?: string;
  fnSpan?: Span;
  /** Whether the loop runs the model it is handed; undefined when its body is not in the file. */
  runsModel?: boolean;
  size?: PtqCalibrationSize;
}

/** A layer of this file that the quantize call reaches although its role keeps it in high precision. */
export interface PtqProtectedHit {
  layerIndex: number;
  /** Why it is reached (`no filter_fn: every nn.Linear`, `no disabled wildcard matches lm_head`). */
  why: string;
}

export interface PtqQuantizeCall {
  span: Span;
  library: 'modelopt' | 'torchao';
  callee: string;
  /** The model argument as written. */
  model: string;
  config?: PtqConfig;
  /** ModelOpt: the forward_loop argument; undefined when none is passed. */
  forwardLoop?: PtqForwardLoop;
  /** torchao: the filter_fn argument as written. */
  filter?: string;
  /** lm-heads and embeddings of this file that the call quantizes. */
  protectedHits: PtqProtectedHit[];
  ownerFunction?: string;
  /** The condition of an enclosing `if` that tests the GPU's compute capability: the format is chosen at run time. */
  capabilityGuard?: string;
}

export interface PtqSave {
  span: Span;
  kind: 'torch-save-state-dict' | 'save-modelopt' | 'export-trtllm' | 'export-hf' | 'export-onnx' | 'modelopt-state';
  text: string;
  /** The saved module (`model` of `model.state_dict()`). */
  receiver?: string;
}

export interface PtqFacts {
  quantizeCalls: PtqQuantizeCall[];
  saves: PtqSave[];
  /** `mtq.print_quant_summary(...)` calls. */
  summaries: Span[];
}
