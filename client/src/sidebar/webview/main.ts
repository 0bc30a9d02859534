/// <reference lib="dom" />
/**
 * The benchmark view's script (browser IIFE, out/webview.js). It renders the state the extension host sends and
 * posts intents back; it owns only UI state (form draft, selected history runs), kept with getState/setState so a
 * re-created webview looks the same. DOM is built with createElement/textContent only (no innerHTML): text from the
 * benchmark and the file system is never parsed as HTML.
 */
import { armLabel, backendLabel as knownBackendLabel, baselineOf, shortBackendLabel, BackendResult, BASELINE_BACKEND, EnvInfo, hasCudaDevice, WorkloadInfo } from '../../../../common/bench-events';
import { isAbRun, isLossCheckRun, MAX_WARM_START, runMode } from '../../../../common/webview-messages';
import type {
  ConversionInfo, BackendChoice, BackendRatio, BenchmarkViewState, HistoryEntry, HostToWebviewMessage, RunMode, RunOptions, RunProgress, RunState, UserError, WebviewToHostMessage,
} from '../../../../common/webview-messages';
import { abBadge, abLines as abLineTexts, abVerdicts, conversionLine, evalLossText, showsEvalLoss } from '../../benchmark/ab';
import { LOSS_CHECK_STEPS, lossVerdict } from '../../../../common/loss-check';
import { peerVerdict } from '../../../../common/peer-verdict';
import { backendSelectionProblem } from '../../benchmark/availability';
import { finalLoss, formatBytes, formatDelta, formatMs, formatNumber, formatRatio, formatTimestamp } from '../../benchmark/format';
import { computeRatios } from '../../benchmark/state';
import { barChart, Bar, lineChart, seriesClass, Series } from './charts';

interface VsCodeApi {
  postMessage(message: WebviewToHostMessage): void;
  getState(): unknown;
  setState(state: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

/** UI state that survives the webview being destroyed and re-created. */
interface PersistedState {
  draft?: RunOptions;
  /** The workload select is on "my model". */
  customWorkload?: boolean;
  /** History runs selected for details (one) or comparison (two). */
  selected: string[];
  /** The host's last selection request applied (BenchmarkViewState.selection.serial). */
  selectionSerial?: number;
  /** Backends the user ticked, including ones that cannot run now (ticked again when they can). */
  wanted?: string[];
  /** The same for the inference tab. */
  wantedInference?: string[];
  /** The tab on show: training or inference. */
  mode?: RunMode;
  /** The last host state: shown at once on re-creation, until the host re-sends it. */
  host?: BenchmarkViewState;
}

const CUSTOM_WORKLOAD = '__custom__';
const MODULE_FUNCTION = /^[A-Za-z_][\w.]*:[A-Za-z_]\w*$/;

const api = acquireVsCodeApi();
const persisted: PersistedState = { selected: [], ...((api.getState() as Partial<PersistedState> | undefined) ?? {}) };
let host: BenchmarkViewState | undefined = persisted.host;

/** A backend's name as the benchmark reports it (new backends included), else the built-in one. */
function labelOf(id: string): string {
  return host?.backends.find((b) => b.id === id)?.label ?? host?.inferenceBackends?.find((b) => b.id === id)?.label ?? knownBackendLabel(id);
}

/** The tab on show. */
function currentMode(): RunMode {
  return persisted.mode ?? runMode(host?.lastOptions);
}

/** The backends the current tab offers. */
function offered(state: BenchmarkViewState): BackendChoice[] {
  return currentMode() === 'inference' ? state.inferenceBackends ?? [] : state.backends;
}

function save(): void {
  api.setState(persisted);
}

function send(message: WebviewToHostMessage): void {
  api.postMessage(message);
}

// ---------------------------------------------------------------------------------------------------------------
// DOM helpers

type Child = Node | string | null | undefined | false;
interface Props {
  class?: string;
  on?: Partial<Record<keyof HTMLElementEventMap, (event: Event) => void>>;
  [attribute: string]: unknown;
}

function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'on') {
      for (const [event, handler] of Object.entries(v as Props['on'] ?? {})) if (handler) el.addEventListener(event, handler);
    } else if (k === 'class') {
      if (v) el.className = String(v);
    } else if (v === true) el.setAttribute(k, '');
    else if (v !== false && v !== undefined && v !== null) el.setAttribute(k, String(v));
  }
  const plain = tag === 'option' || tag === 'pre' || tag === 'code';
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(typeof c === 'string' ? (plain ? document.createTextNode(c) : words(c)) : c);
  return el;
}

/**
 * Text whose hyphenated words (llama-7b-slice, 2026-12-01, torch-fp8) never break at a hyphen, and whose code tokens
 * (torch.float8_e4m3fn, torch._scaled_mm, precisionLens.pythonPath) break only after a dot or an underscore (a <wbr>
 * there): a narrow sidebar wraps between words and at those token boundaries only, never inside a name ("float8_e4m
 * 3fn"). Paths excepted: they may break anywhere rather than overflow. Every string the view renders goes through here
 * (h() children).
 */
function words(text: string): Node {
  if (!/\S-\S/.test(text) && !CODE_TOKEN.test(text)) return document.createTextNode(text);
  const fragment = document.createDocumentFragment();
  for (const part of text.split(/(\S+)/)) {
    if (part === '') continue;
    if (/\S-\S/.test(part) && !/[\\/]/.test(part)) {
      const span = document.createElement('span');
      span.className = 'nowrap';
      span.textContent = part;
      fragment.append(span);
    } else if (CODE_TOKEN.test(part) && !/[\\/]/.test(part)) {
      tokenPieces(part).forEach((piece, i) => fragment.append(...(i ? [document.createElement('wbr')] : []), document.createTextNode(piece)));
    } else fragment.append(document.createTextNode(part));
  }
  return fragment;
}

/** A dotted or underscored name (not a decimal number: 1.245x, 0.80 stay whole). */
const CODE_TOKEN = /[A-Za-z_][._]\w|\w[._][A-Za-z_]/;

/** `torch.float8_e4m3fn,` -> [`torch.`, `float8_`, `e4m3fn,`]: split after each dot or underscore between name characters. */
function tokenPieces(token: string): string[] {
  const pieces: string[] = [];
  let from = 0;
  for (let i = 1; i < token.length - 1; i++) {
    const c = token[i];
    if (c !== '.' && c !== '_') continue;
    const before = token[i - 1];
    const after = token[i + 1];
    if (!/\w/.test(before) || !/\w/.test(after) || (c === '.' && /\d/.test(before) && /\d/.test(after))) continue;
    pieces.push(token.slice(from, i + 1));
    from = i + 1;
  }
  pieces.push(token.slice(from));
  return pieces;
}

/** Replaces an element's children, skipping the empty ones. */
function fill(el: Element, ...children: Child[]): void {
  el.replaceChildren(...children.filter((c): c is Node | string => c !== null && c !== undefined && c !== false));
}

function button(label: string, onClick: () => void, props: Props = {}): HTMLButtonElement {
  return h('button', { type: 'button', ...props, on: { click: onClick } }, label);
}

// ---------------------------------------------------------------------------------------------------------------
// Skeleton: sections are built once and refilled; the form keeps its inputs (and focus) across updates.

const app = document.getElementById('app') ?? document.body;
const sections = {
  trust: h('section', { class: 'banner warning', role: 'note', hidden: true }),
  env: h('section', { class: 'card env', 'aria-label': 'Environment' }),
  form: h('section', { class: 'card form', 'aria-label': 'Benchmark settings' }),
  progress: h('section', { class: 'progress-section', 'aria-live': 'polite', hidden: true }),
  error: h('section', { class: 'card error', role: 'alert', hidden: true }),
  results: h('section', { class: 'results', hidden: true }),
  history: h('section', { class: 'history', 'aria-label': 'History' }),
  details: h('section', { class: 'details', hidden: true }),
};
app.replaceChildren(...Object.values(sections));
app.removeAttribute('aria-busy');

let chartWidth = Math.max(200, app.clientWidth - 4);

// ---------------------------------------------------------------------------------------------------------------
// The form

const form = buildForm();
sections.form.append(form.root);

function buildForm() {
  // The options show the preset's name only (a description cut at the sidebar's edge said nothing); the chosen one's
  // description is the line below.
  const workloadSelect = h('select', { id: 'workload', 'aria-describedby': 'workload-help', on: { change: () => onWorkloadPicked() } });
  const workloadHelp = h('p', { id: 'workload-help', class: 'help' });
  const customInput = h('input', {
    id: 'custom-workload', type: 'text', placeholder: 'package.module:build_model', spellcheck: 'false',
    'aria-describedby': 'custom-help', on: { input: () => onFormInput() },
  });
  const customHelp = h('p', { id: 'custom-help', class: 'help' }, 'A function in your workspace that returns the model (see bench/README.md).');
  const customRow = h('div', { class: 'row custom', hidden: true }, h('label', { for: 'custom-workload' }, 'Module:function'), customInput, customHelp);
  const backendList = h('div', { class: 'backends' });
  const num = (id: string, label: string, min: number, help: string) => {
    const input = h('input', { id, type: 'number', min, step: 1, inputmode: 'numeric', title: help, on: { input: () => onFormInput() } });
    return { input, row: h('div', { class: 'field' }, h('label', { for: id }, label), input) };
  };
  const steps = num('steps', 'Steps', 1, 'Measured training steps per backend');
  const warmup = num('warmup', 'Warm-up', 0, 'Steps run before measuring (compilation, autotuning)');
  const batch = num('batch', 'Batch', 1, 'Sequences per step');
  const seq = num('seq', 'Sequence length', 1, 'Tokens per sequence');
  const promptLen = num('prompt-len', 'Prompt tokens', 1, 'Prompt tokens per sequence (prefill)');
  const newTokens = num('new-tokens', 'New tokens', 0, 'Tokens decoded per sequence (greedy, KV cache)');
  const repeats = num('repeats', 'Repeats', 1, 'Timed repetitions of prefill and decode (the median is shown)');
  const compile = h('input', { type: 'checkbox', id: 'compile', on: { change: () => onFormInput() } });
  const compileRow = h('label', { class: 'check', for: 'compile', title: 'torch.compile every backend (the same setting for all)' }, compile, ' torch.compile');
  const tab = (mode: RunMode, label: string) => h('button', {
    type: 'button', role: 'tab', id: `tab-${mode}`, class: 'tab', 'aria-controls': 'benchmark-form', on: { click: () => onModeChosen(mode) },
  }, label);
  const tabs = { train: tab('train', 'Training'), inference: tab('inference', 'Inference') };
  const modeHelp = h('p', { class: 'help', id: 'mode-help' });
  const trainGrid = h('div', { class: 'grid' }, steps.row, warmup.row, batch.row, seq.row);
  const inferenceGrid = h('div', { class: 'grid', hidden: true }, promptLen.row, newTokens.row, repeats.row);
  const validation = h('p', { class: 'validation', role: 'status' });
  const runButton = button('Run', () => onRun(), { class: 'primary', id: 'run', 'aria-describedby': 'run-reason' });
  const runReason = h('p', { id: 'run-reason', class: 'run-reason', role: 'status', hidden: true });
  const cancelButton = button('Cancel', () => send({ type: 'cancel' }), { class: 'secondary', id: 'cancel' });
  // The A/B of the workspace's own project: asks for its module:function, converts a copy, measures both.
  const measureButton = button('Measure conversion', () => onMeasure(), { class: 'secondary', id: 'measure-conversion', 'aria-describedby': 'ab-reason' });
  const abReason = h('p', { id: 'ab-reason', class: 'run-reason', role: 'status', hidden: true });
  const abHelp = h('p', { class: 'help', id: 'ab-help' }, 'Measure conversion: your own training step as it is, then as converted to FP8 (a copy), then torchao on the original: same weights and batches.');
  // The loss check (`measure --loss-check`): does FP8 keep the loss? Longer: a training recipe and the BF16 arm twice.
  const lossCheck = h('input', { type: 'checkbox', id: 'loss-check', 'aria-describedby': 'loss-check-help', on: { change: () => onFormInput() } });
  const lossCheckRow = h('label', { class: 'check', for: 'loss-check', title: 'Also compare the eval loss: measure --loss-check' }, lossCheck, ' Loss check');
  const lossCheckHelp = h('p', { class: 'help', id: 'loss-check-help', hidden: true },
    `Loss check: ${LOSS_CHECK_STEPS} training steps (Steps when higher) with warm-up, cosine schedule and clipping; each arm's eval loss on batches it never trained on, and BF16 run again for the noise floor (torchao is left out). Warm start N: every arm starts from the original's weights after N BF16 steps, past the first steps' loss spikes. Rounded start: BF16 once more from its weights rounded to BF16, how far this training moves from a change far smaller than FP8's.`);
  // Where the loss comparison starts: 0 from the random init; N, every arm from the original's weights after N BF16 steps.
  const warmStart = num('warm-start', 'Warm start', 0, 'BF16 steps before the loss check: every arm starts from the weights they leave (0: from the random init)');
  warmStart.input.setAttribute('aria-describedby', 'loss-check-help');
  // BF16 once more from its weights rounded to BF16: how far the training moves from a far smaller change than FP8's.
  const roundedStart = h('input', { type: 'checkbox', id: 'rounded-start', 'aria-describedby': 'loss-check-help', on: { change: () => onFormInput() } });
  const roundedStartRow = h('label', { class: 'check', for: 'rounded-start', title: 'Also run BF16 from its weights rounded once to BF16: measure --rounded-start' }, roundedStart, ' Rounded start');
  const lossCheckOptions = h('div', { class: 'grid loss-check-options', hidden: true }, warmStart.row, roundedStartRow);
  const root = h('form', { id: 'benchmark-form', on: { submit: (e) => { e.preventDefault(); onRun(); } } },
    h('h2', {}, 'Benchmark'),
    h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Benchmark mode' }, tabs.train, tabs.inference),
    modeHelp,
    h('div', { class: 'row' }, h('label', { for: 'workload' }, 'Workload'), workloadSelect, workloadHelp),
    customRow,
    h('fieldset', {}, h('legend', {}, 'Backends'), backendList),
    trainGrid,
    inferenceGrid,
    compileRow,
    validation,
    h('div', { class: 'buttons' }, runButton, cancelButton),
    runReason,
    abHelp,
    h('div', { class: 'buttons measure' }, measureButton, lossCheckRow),
    lossCheckOptions,
    lossCheckHelp,
    abReason,
  );
  return {
    root, workloadSelect, workloadHelp, customInput, customRow, backendList, backendBoxes: [] as BackendBox[], steps: steps.input, warmup: warmup.input,
    batch: batch.input, seq: seq.input, compile, validation, runButton, runReason, cancelButton, workloadKey: '', backendKey: '',
    promptLen: promptLen.input, newTokens: newTokens.input, repeats: repeats.input, compileRow, tabs, modeHelp, trainGrid, inferenceGrid,
    seqRow: seq.row, measureButton, abReason, abHelp, lossCheck, lossCheckHelp, warmStart: warmStart.input, roundedStart, lossCheckOptions,
  };
}

const MODE_HELP: Record<RunMode, string> = {
  train: 'BF16 vs FP8 training steps: tokens/s, step time, peak memory, loss.',
  inference: 'Serving: prefill and decode tokens/s, peak memory, and the accuracy cost against BF16 (logit difference, next-token agreement).',
};

/** Shows the tab's own fields and backends; each tab keeps its ticks and its inputs. */
function showMode(mode: RunMode): void {
  for (const [m, el] of Object.entries(form.tabs) as Array<[RunMode, HTMLButtonElement]>) {
    el.setAttribute('aria-selected', String(m === mode));
    el.classList.toggle('selected', m === mode);
  }
  form.modeHelp.textContent = MODE_HELP[mode];
  form.trainGrid.hidden = mode === 'inference';
  form.inferenceGrid.hidden = mode !== 'inference';
  form.compileRow.hidden = mode === 'inference';
  // The A/B measures training steps: it belongs to the Training tab.
  for (const el of [form.measureButton.parentElement, form.abHelp]) if (el) el.hidden = mode === 'inference';
  form.abReason.hidden = mode === 'inference' || form.abReason.textContent === '';
  showLossCheckOptions(mode);
  // Batch is shared: in the inference grid it sits beside the prompt and decode lengths.
  const batchRow = form.batch.closest('.field');
  if (batchRow) (mode === 'inference' ? form.inferenceGrid : form.trainGrid).insertBefore(batchRow, mode === 'inference' ? form.inferenceGrid.firstChild : form.seqRow);
}

/** The loss check's help and its warm-start field: shown on the Training tab while the box is ticked. */
function showLossCheckOptions(mode: RunMode): void {
  const shown = mode !== 'inference' && form.lossCheck.checked;
  form.lossCheckHelp.hidden = !shown;
  form.lossCheckOptions.hidden = !shown;
}

function onModeChosen(mode: RunMode): void {
  if (currentMode() === mode) return;
  // The ticks of both tabs are kept in persisted.wanted / wantedInference (those that cannot run now included).
  const before = readForm();
  persisted.mode = mode;
  form.backendKey = '';
  showMode(mode);
  if (host) syncBackends(host, { ...before, mode });
  onFormInput();
}

interface BackendBox {
  choice: BackendChoice;
  box: HTMLInputElement;
}

/** One checkbox per backend the host offers; one that cannot run here is disabled and says why. */
function backendRow(choice: BackendChoice): { row: HTMLElement; box: HTMLInputElement } {
  const id = `backend-${choice.id}`;
  const blocked = choice.available === false;
  const box = h('input', {
    type: 'checkbox', id, value: choice.id, disabled: blocked, 'aria-describedby': blocked ? `${id}-reason` : undefined,
    on: { change: () => onBackendToggled(choice.id, box.checked) },
  });
  const row = h('div', { class: blocked ? 'backend blocked' : 'backend' },
    h('label', { for: id, title: choice.description, class: 'check' }, box, ` ${choice.label}`),
    blocked ? h('span', { id: `${id}-reason`, class: 'reason' }, choice.reason ?? 'not available here') : null);
  return { row, box };
}

function onBackendToggled(id: string, on: boolean): void {
  const inference = currentMode() === 'inference';
  const form0 = readForm();
  const wanted = new Set((inference ? persisted.wantedInference : persisted.wanted) ?? (inference ? form0.inferenceBackends : form0.backends));
  if (on) wanted.add(id);
  else wanted.delete(id);
  if (inference) persisted.wantedInference = [...wanted];
  else persisted.wanted = [...wanted];
  onFormInput();
}

/** Rebuilds the backend list when what the host offers changes; the user's ticks are kept (persisted.wanted). */
function syncBackends(state: BenchmarkViewState, draft: RunOptions): void {
  const choices = offered(state);
  const key = JSON.stringify([currentMode(), choices]);
  if (key === form.backendKey) return;
  form.backendKey = key;
  persisted.wanted ??= draft.backends;
  persisted.wantedInference ??= draft.inferenceBackends ?? ['bf16'];
  const wanted = new Set(currentMode() === 'inference' ? persisted.wantedInference : persisted.wanted);
  const rows = choices.map((choice) => ({ choice, ...backendRow(choice) }));
  for (const r of rows) r.box.checked = wanted.has(r.choice.id) && r.choice.available !== false;
  form.backendBoxes = rows.map(({ choice, box }) => ({ choice, box }));
  form.backendList.replaceChildren(...rows.map((r) => r.row));
}

function readForm(): RunOptions {
  const custom = form.workloadSelect.value === CUSTOM_WORKLOAD;
  const n = (input: HTMLInputElement, d: number) => (input.value.trim() === '' || !Number.isFinite(input.valueAsNumber) ? d : input.valueAsNumber);
  const d = host?.lastOptions ?? persisted.draft;
  const mode = currentMode();
  const ticked = form.backendBoxes.filter((b) => b.box.checked && b.choice.available !== false).map((b) => b.choice.id);
  // The other tab's ticks: those the user made there (kept while this tab is on show).
  const kept = (wanted: string[] | undefined, fallback: string[] | undefined) => wanted ?? fallback ?? [];
  const warmStart = n(form.warmStart, 0);
  return {
    mode,
    workload: custom ? form.customInput.value.trim() : form.workloadSelect.value,
    backends: mode === 'train' ? ticked : kept(persisted.wanted, d?.backends),
    inferenceBackends: mode === 'inference' ? ticked : kept(persisted.wantedInference, d?.inferenceBackends),
    promptLen: n(form.promptLen, d?.promptLen ?? 512),
    newTokens: n(form.newTokens, d?.newTokens ?? 64),
    repeats: n(form.repeats, d?.repeats ?? 5),
    steps: n(form.steps, d?.steps ?? 50),
    warmup: n(form.warmup, d?.warmup ?? 10),
    batch: n(form.batch, d?.batch ?? 8),
    seq: n(form.seq, d?.seq ?? 1024),
    compile: form.compile.checked,
    ...(form.lossCheck.checked ? { lossCheck: true, ...(warmStart !== 0 ? { warmStart } : {}), ...(form.roundedStart.checked ? { roundedStart: true } : {}) } : {}),
  };
}

function validate(options: RunOptions): string | undefined {
  const inference = runMode(options) === 'inference';
  if (inference && form.workloadSelect.value === CUSTOM_WORKLOAD) return 'Inference runs the presets (the decode reads their modules): pick one.';
  if (form.workloadSelect.value === CUSTOM_WORKLOAD && !MODULE_FUNCTION.test(options.workload)) {
    return 'Enter your model as module:function, e.g. mypkg.model:build.';
  }
  const backends = inference ? options.inferenceBackends ?? [] : options.backends;
  const selection = backendSelectionProblem(backends, form.backendBoxes.map((b) => b.choice));
  if (selection) return selection;
  if (backends.length === 0) return undefined; // no backend can run here: the rows and Run's reason say why
  // Inference always measures BF16 first (the accuracy cost is taken against it): no warning needed there.
  if (!inference && !backends.includes(BASELINE_BACKEND)) return 'Without BF16 there is no baseline: ratios will be missing.';
  const fields: ReadonlyArray<readonly [string, number | undefined, number]> = inference
    ? [['Batch', options.batch, 1], ['Prompt tokens', options.promptLen, 1], ['New tokens', options.newTokens, 0], ['Repeats', options.repeats, 1]]
    : [['Steps', options.steps, 1], ['Warm-up', options.warmup, 0], ['Batch', options.batch, 1], ['Sequence length', options.seq, 1]];
  for (const [name, v, min] of fields) {
    if (v === undefined || !Number.isInteger(v) || v < min) return `${name} must be a whole number of at least ${min}.`;
  }
  return undefined;
}

/** Why the loss check's warm start cannot be used (it belongs to Measure conversion, not to Run), or undefined. */
function warmStartProblem(options: RunOptions): string | undefined {
  const v = options.warmStart ?? 0;
  return options.lossCheck && (!Number.isInteger(v) || v < 0 || v > MAX_WARM_START)
    ? `Warm start must be a whole number of BF16 steps from 0 to ${MAX_WARM_START}.` : undefined;
}

/** The chosen preset's description under the list (hidden for "My model", which has its own help). */
function showWorkloadHelp(workloads: readonly WorkloadInfo[]): void {
  const description = workloads.find((w) => w.name === form.workloadSelect.value)?.description;
  fill(form.workloadHelp, description ?? null);
  form.workloadHelp.hidden = !description;
}

/** A preset brings its own batch size and sequence length. */
function onWorkloadPicked(): void {
  const preset = host?.workloads.find((w) => w.name === form.workloadSelect.value);
  if (preset?.batch !== undefined) form.batch.value = String(preset.batch);
  if (preset?.seq !== undefined) form.seq.value = String(preset.seq);
  showWorkloadHelp(host?.workloads ?? []);
  onFormInput();
  if (form.workloadSelect.value === CUSTOM_WORKLOAD) form.customInput.focus();
}

let formTimer: number | undefined;
function onFormInput(): void {
  persisted.customWorkload = form.workloadSelect.value === CUSTOM_WORKLOAD;
  form.customRow.hidden = !persisted.customWorkload;
  showLossCheckOptions(currentMode());
  const options = readForm();
  persisted.draft = options;
  save();
  const problem = validate(options);
  form.validation.textContent = problem ?? '';
  form.validation.className = problem && !problem.startsWith('Without BF16') ? 'validation error-text' : 'validation';
  syncButtons();
  window.clearTimeout(formTimer);
  formTimer = window.setTimeout(() => send({ type: 'formChanged', options }), 400);
}

function onRun(): void {
  const options = readForm();
  const problem = validate(options);
  if (problem && !problem.startsWith('Without BF16')) {
    form.validation.textContent = problem;
    form.validation.className = 'validation error-text';
    return;
  }
  persisted.selected = [];
  save();
  send({ type: 'run', options });
}

/** "Measure conversion": the host asks for the workload (remembered per workspace) and runs the A/B. */
function onMeasure(): void {
  persisted.selected = [];
  save();
  send({ type: 'measureConversion', options: readForm() });
}

function isActive(run: RunState | undefined): boolean {
  return !!run && (run.status === 'starting' || run.status === 'running' || run.status === 'cancelling');
}

/** Why Run is disabled now, or undefined: the host's verdict on the environment, then the form's own. */
function runBlocked(): string | undefined {
  if (!host) return 'Loading…';
  if (host.runBlocked) return host.runBlocked;
  if (isActive(host.run)) return undefined; // Cancel is the action; no reason needed
  const options = readForm();
  if (form.backendBoxes.length > 0 && form.backendBoxes.every((b) => b.choice.available === false)) {
    return 'None of the backends can run here.';
  }
  const invalid = validate(options);
  return invalid && !invalid.startsWith('Without BF16') ? invalid : undefined;
}

function syncButtons(): void {
  const active = isActive(host?.run);
  const locked = !host?.trusted || active;
  const reason = runBlocked();
  form.runButton.disabled = locked || reason !== undefined;
  form.runButton.title = reason ?? 'Run the benchmark with these settings';
  // The form's own validation is shown above the buttons already; the environment's reason goes here.
  const shown = reason && reason !== form.validation.textContent ? reason : undefined;
  form.runReason.hidden = !shown || active;
  form.runReason.textContent = shown ?? '';
  form.cancelButton.disabled = !active || host?.run.status === 'cancelling';
  // Measure conversion: disabled where it cannot run, with the reason (said once when it is Run's own).
  const abReason = host ? host.abBlocked ?? warmStartProblem(readForm()) : 'Loading…';
  form.measureButton.disabled = locked || abReason !== undefined;
  form.measureButton.title = abReason ?? 'Convert a copy of this workspace\'s project and measure it against the original on this GPU';
  const abShown = abReason && abReason !== (form.runReason.hidden ? undefined : form.runReason.textContent) ? abReason : undefined;
  form.abReason.textContent = abShown ?? '';
  form.abReason.hidden = !abShown || active || currentMode() === 'inference';
  form.root.querySelectorAll('input, select').forEach((el) => {
    const blockedBackend = form.backendBoxes.some((b) => b.box === el && b.choice.available === false);
    (el as HTMLInputElement).disabled = locked || blockedBackend;
  });
  // The loss check is an option of Measure conversion: usable where that action is.
  form.lossCheck.disabled = form.measureButton.disabled;
  form.warmStart.disabled = form.measureButton.disabled;
  form.roundedStart.disabled = form.measureButton.disabled;
}

/** Fills the workload list and (first time) the inputs. Never overwrites what the user is typing. */
function syncForm(state: BenchmarkViewState): void {
  const workloads: WorkloadInfo[] = state.workloads.length > 0 ? state.workloads : [{ name: state.lastOptions.workload }];
  const key = workloads.map((w) => w.name).join('\n');
  const draft = persisted.draft ?? state.lastOptions;
  if (key !== form.workloadKey) {
    form.workloadKey = key;
    const options = workloads.map((w) => h('option', { value: w.name, title: w.description }, w.name));
    options.push(h('option', { value: CUSTOM_WORKLOAD }, 'My model (module:function)…'));
    form.workloadSelect.replaceChildren(...options);
    const preset = workloads.some((w) => w.name === draft.workload);
    const custom = persisted.customWorkload ?? (!preset && MODULE_FUNCTION.test(draft.workload));
    form.workloadSelect.value = custom ? CUSTOM_WORKLOAD : preset ? draft.workload : workloads[0].name;
    if (custom && !form.customInput.value) form.customInput.value = MODULE_FUNCTION.test(draft.workload) ? draft.workload : '';
    form.customRow.hidden = !custom;
  }
  showWorkloadHelp(workloads);
  if (!formFilled) {
    persisted.mode ??= runMode(draft);
    showMode(currentMode());
  }
  syncBackends(state, draft);
  if (!formFilled) {
    formFilled = true;
    form.promptLen.value = String(draft.promptLen ?? 512);
    form.newTokens.value = String(draft.newTokens ?? 64);
    form.repeats.value = String(draft.repeats ?? 5);
    form.steps.value = String(draft.steps);
    form.warmup.value = String(draft.warmup);
    form.batch.value = String(draft.batch);
    form.seq.value = String(draft.seq);
    form.compile.checked = draft.compile;
    form.lossCheck.checked = draft.lossCheck === true;
    form.warmStart.value = String(draft.warmStart ?? 0);
    form.roundedStart.checked = draft.roundedStart === true;
    showLossCheckOptions(currentMode());
  }
  syncButtons();
}
let formFilled = false;

// ---------------------------------------------------------------------------------------------------------------
// Environment card

function renderTrust(state: BenchmarkViewState): void {
  sections.trust.hidden = state.trusted;
  if (state.trusted) return;
  fill(sections.trust,
    h('strong', {}, 'Benchmark disabled: this workspace is not trusted.'),
    h('p', {}, 'The benchmark runs a Python interpreter and your model code. Diagnostics and quick fixes still work.'),
    button('Manage Workspace Trust', () => send({ type: 'manageTrust' }), { class: 'secondary' }),
  );
}

function dlRow(term: string, ...value: Child[]): HTMLElement[] {
  return [h('dt', {}, term), h('dd', {}, ...value)];
}

function renderEnv(state: BenchmarkViewState): void {
  const env = state.environment;
  const info: EnvInfo | undefined = env.info;
  const rows: HTMLElement[] = [];
  rows.push(...dlRow('Interpreter',
    state.interpreter ? h('code', { class: 'path', id: 'interpreter-path' }, state.interpreter.path) : h('span', { class: 'muted' }, 'not chosen yet'),
    state.interpreter ? h('div', { class: 'muted' }, state.interpreter.detail) : null,
    button('Choose interpreter…', () => send({ type: 'chooseInterpreter' }), {
      class: 'link', id: 'choose-interpreter', title: 'Pick from the interpreters found (setting, Python extensions, PATH)',
    })));
  if (state.remote) {
    rows.push(...dlRow('Remote', `${state.remote.name}`, state.remote.hostname ? h('span', {}, ' — runs on ', h('strong', {}, state.remote.hostname)) : h('span', { class: 'muted' }, ' — host not reported yet')));
  } else if (info?.hostname) {
    rows.push(...dlRow('Host', info.hostname));
  }
  if (info) {
    const gpu = info.gpus[0];
    rows.push(...dlRow('GPU', gpu
      ? `${gpu.name}${info.gpus.length > 1 ? ` (+${info.gpus.length - 1} more)` : ''}`
      : h('span', { class: 'bad' }, 'No CUDA device')));
    if (gpu) rows.push(...dlRow('Capability', gpu.capability ? `${gpu.capability} (sm_${gpu.capability.replace('.', '')})` : 'unknown', gpu.memoryBytes ? h('span', { class: 'muted' }, ` · ${formatBytes(gpu.memoryBytes)}`) : null));
    rows.push(...dlRow('FP8', info.fp8Available ? h('span', { class: 'good' }, 'yes') : h('span', { class: 'bad' }, 'no'), info.fp8Reason ? h('div', { class: 'muted' }, info.fp8Reason) : null));
    rows.push(...dlRow('Transformer Engine', info.teVersion ? `${info.teVersion}${info.teApi ? ` (${info.teApi})` : ''}` : 'not installed', info.teError ? h('div', { class: 'muted' }, info.teError) : null));
    if (info.torchFp8Available !== undefined) {
      rows.push(...dlRow('torch FP8', info.torchFp8Available ? 'yes' : 'no', info.torchFp8Reason ? h('div', { class: 'muted' }, info.torchFp8Reason) : null));
    }
    rows.push(...dlRow('PyTorch', info.torchVersion ? `${info.torchVersion}${info.cudaVersion ? ` · CUDA ${info.cudaVersion}` : ''}` : 'not installed'));
  }
  const cuda = hasCudaDevice(info);
  const summaryClass = env.status === 'failed' || (info && !cuda) ? 'summary bad-box' : info?.fp8Available ? 'summary good-box' : 'summary';
  fill(sections.env,
    h('div', { class: 'card-head' },
      h('h2', {}, 'Environment'),
      h('div', { class: 'actions' },
        button('Refresh', () => send({ type: 'refreshEnvironment' }), { class: 'link', title: 'Ask the interpreter again', disabled: !state.trusted || env.status === 'probing' }))),
    env.status === 'probing' ? h('p', { class: 'muted', role: 'status' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), ' Checking Python, PyTorch and the GPU…') : null,
    env.summary ? h('p', { class: summaryClass }, env.summary) : null,
    env.status === 'failed' && env.error ? errorBody(env.error) : null,
    rows.length > 0 ? h('dl', {}, ...rows) : null,
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Progress, errors

function phaseText(progress: RunProgress | undefined, status: RunState['status']): string {
  if (status === 'cancelling') return 'Cancelling…';
  if (!progress) return status === 'starting' ? 'Starting…' : status;
  const parts = [progress.phase.replace(/_/g, ' ')];
  if (progress.backend) parts.push(labelOf(progress.backend));
  if (progress.step !== undefined && progress.total !== undefined) parts.push(`step ${progress.step}/${progress.total}`);
  if (progress.message) parts.push(progress.message);
  return parts.join(' · ');
}

const progressLabel = h('div', { class: 'progress-label' });
const progressBar = h('progress', { max: 1, 'aria-label': 'Benchmark progress' });
sections.progress.append(progressLabel, progressBar);

function renderProgress(run: RunState): void {
  const active = isActive(run);
  sections.progress.hidden = !active && run.status !== 'cancelled';
  progressLabel.textContent = run.status === 'cancelled' ? 'Cancelled: partial results below.' : phaseText(run.progress, run.status);
  const fraction = run.progress?.fraction;
  if (active && fraction !== undefined) progressBar.value = fraction;
  else progressBar.removeAttribute('value'); // indeterminate
  progressBar.hidden = !active;
}

function errorBody(error: UserError): HTMLElement {
  return h('div', { class: 'error-body' },
    h('h3', {}, error.title),
    h('p', {}, error.message),
    error.hint ? h('p', { class: 'hint' }, error.hint) : null,
    error.details ? h('details', {}, h('summary', {}, 'Last lines of the benchmark log'), h('pre', {}, error.details)) : null,
  );
}

function renderError(run: RunState): void {
  const error = run.status === 'failed' ? run.error : undefined;
  sections.error.hidden = !error;
  if (!error) return;
  const interpreterProblem = /interpreter|torch/.test(error.code);
  fill(sections.error,
    errorBody(error),
    h('div', { class: 'buttons' },
      button('Open log', () => send({ type: 'openLog' }), { class: 'secondary' }),
      interpreterProblem ? button('Choose interpreter…', () => send({ type: 'chooseInterpreter' }), { class: 'secondary' }) : null),
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Results: charts and table (the current run, or one history run)

function ordered(results: readonly BackendResult[]): BackendResult[] {
  const base = baselineOf(results);
  return [...results].sort((a, b) => (a.backend === base ? -1 : b.backend === base ? 1 : 0));
}

/**
 * An A/B run's lines under its table: what the conversion applied and how many GEMM forwards ran in FP8. The verdicts
 * (the last of ab.ts's lines: against the torchao peer, the loss check's) head the block instead: they are the
 * answers the run was made for.
 */
function abLines(results: readonly BackendResult[], conversion: ConversionInfo | undefined): HTMLElement | null {
  const verdicts = abVerdicts(results);
  const lines = abLineTexts(results, conversion).filter((l) => !verdicts.includes(l));
  return lines.length > 0 ? h('ul', { class: 'plain ab-lines' }, ...lines.map((l) => h('li', {}, l))) : null;
}

function lossSeries(results: readonly BackendResult[], suffix = '', extraClass = ''): Series[] {
  return ordered(results)
    .filter((r) => !r.skippedReason && r.losses.length > 0)
    .map((r, i) => ({
      label: `${armLabel(r, labelOf(r.backend))}${suffix}`,
      cls: `${seriesClass(r.backend, i)}${extraClass}`,
      points: r.losses.map((l, j): [number, number | null] => [j * (r.lossStride ?? 1), l]),
    }));
}

/** Where the measured steps start on the loss chart (the earlier losses are warm-up). */
function measuredFrom(results: readonly BackendResult[]): { x: number; label: string } | undefined {
  const from = results.find((r) => r.lossMeasuredFrom !== undefined && r.lossMeasuredFrom > 0)?.lossMeasuredFrom;
  return from !== undefined ? { x: from, label: 'measured →' } : undefined;
}

function legend(items: Array<{ label: string; cls: string }>): HTMLElement {
  return h('ul', { class: 'legend' }, ...items.map((i) => h('li', { class: i.cls }, h('span', { class: 'swatch', 'aria-hidden': 'true' }), i.label)));
}

/** Whether these are `--mode inference` results. */
function isInference(results: readonly BackendResult[]): boolean {
  return results.some((r) => r.inference !== undefined);
}

const pct = (x: number | undefined) => (x !== undefined ? `${formatNumber(x * 100, 1)} %` : '–');

/**
 * An inference run: prefill and decode tokens/s (charts and table), peak memory, and the accuracy cost against BF16.
 * A fake-quant backend (ModelOpt) is shown for its accuracy only: its speed is left out of the charts and ratios.
 */
function inferenceBlock(results: readonly BackendResult[], ratiosIn: readonly BackendRatio[], title: string, copy: () => void): HTMLElement {
  const ratios = ratiosIn.length > 0 ? ratiosIn : computeRatios(results);
  const ran = ordered(results).filter((r) => !r.skippedReason);
  const timed = ran.filter((r) => !r.inference?.referenceOnly);
  const ratioOf = (b: string) => ratios.find((r) => r.backend === b);
  const bars = (pick: (r: BackendResult) => number | undefined, speed: (r: BackendRatio | undefined) => number | undefined): Bar[] => timed.map((r, i) => ({
    label: shortBackendLabel(r.backend), value: pick(r), cls: seriesClass(r.backend, i), title: labelOf(r.backend),
    text: `${formatNumber(pick(r), 0)}${speed(ratioOf(r.backend)) ? ` (${formatRatio(speed(ratioOf(r.backend)))})` : ''}`,
  }));
  const decode = bars((r) => r.inference?.decodeTokensPerS, (x) => x?.decodeSpeedup);
  const prefill = bars((r) => r.inference?.prefillTokensPerS, (x) => x?.prefillSpeedup);
  const columns = ['prefill tokens/s', 'decode tokens/s', 'peak memory', 'max |Δ logit|', 'mean |Δ logit|', 'next-token agreement', 'prefill vs BF16', 'decode vs BF16'];
  const cell = (i: number, text: string, cls = '') => h('td', { 'data-label': columns[i], class: cls || undefined }, text);
  const speedCell = (i: number, r: BackendResult, x: number | undefined) => r.backend === BASELINE_BACKEND ? cell(i, 'baseline')
    : r.inference?.referenceOnly ? cell(i, 'not FP8 speed', 'muted') : cell(i, formatRatio(x), x !== undefined ? (x >= 1 ? 'good' : 'bad') : '');
  const table = h('table', { class: 'results-table inference' },
    h('thead', {}, h('tr', {}, ...['Backend', ...columns].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, ...ordered(results).map((r) => {
      if (r.skippedReason) return h('tr', { class: 'skipped' }, h('th', { scope: 'row' }, labelOf(r.backend)), h('td', { colspan: 8 }, `skipped: ${r.skippedReason}`));
      const f = r.inference ?? {};
      const ratio = ratioOf(r.backend);
      const base = r.backend === BASELINE_BACKEND;
      return h('tr', {},
        h('th', { scope: 'row', title: r.label }, labelOf(r.backend),
          f.referenceOnly ? h('span', { class: 'muted' }, ' (accuracy reference only)') : null, r.emulated ? h('span', { class: 'muted' }, ' (emulated)') : null),
        cell(0, formatNumber(f.prefillTokensPerS, 0)),
        cell(1, formatNumber(f.decodeTokensPerS, 0)),
        cell(2, formatBytes(r.peakMemoryBytes)),
        base ? null : cell(3, formatNumber(f.maxAbsLogitDiff, 3)),
        base ? null : cell(4, formatNumber(f.meanAbsLogitDiff, 3)),
        base ? null : cell(5, pct(f.nextTokenAgreement)),
        speedCell(6, r, ratio?.prefillSpeedup),
        base ? null : speedCell(7, r, ratio?.decodeSpeedup),
      );
    })),
  );
  const emulated = ran.some((r) => r.emulated);
  return h('div', { class: 'result-block' },
    h('div', { class: 'card-head' }, h('h2', {}, title), h('div', { class: 'actions' }, button('Copy as Markdown', copy, { class: 'link' }))),
    decode.length > 0 ? h('h3', {}, 'Decode (tokens/s)') : null,
    decode.length > 0 ? barChart(decode, { width: chartWidth, label: `decode tokens per second: ${decode.map((b) => `${b.label} ${b.text}`).join(', ')}` }) : null,
    prefill.length > 0 ? h('h3', {}, 'Prefill (tokens/s)') : null,
    prefill.length > 0 ? barChart(prefill, { width: chartWidth, label: `prefill tokens per second: ${prefill.map((b) => `${b.label} ${b.text}`).join(', ')}` }) : null,
    h('div', { class: 'table-wrap' }, table),
    ran.some((r) => r.inference?.referenceOnly) ? h('p', { class: 'muted' }, 'ModelOpt quantization is fake-quant (FP8 simulated in BF16): its accuracy is a reference, its speed is not FP8 speed.') : null,
    emulated ? h('p', { class: 'banner warning' }, 'FP8 was emulated on this machine: these figures test the harness, they are not a benchmark.') : null,
  );
}

function resultsBlock(results: readonly BackendResult[], ratiosIn: readonly BackendRatio[], title: string, copy: () => void, conversion?: ConversionInfo): HTMLElement {
  if (isInference(results)) return inferenceBlock(results, ratiosIn, title, copy);
  const baseline = baselineOf(results);
  const vs = baseline === BASELINE_BACKEND ? 'BF16' : 'original';
  const ratios = ratiosIn.length > 0 ? ratiosIn : computeRatios(results);
  const ran = ordered(results).filter((r) => !r.skippedReason);
  const skipped = results.filter((r) => r.skippedReason);
  const ratioOf = (b: string) => ratios.find((r) => r.backend === b);
  const tpsBars: Bar[] = ran.map((r, i) => ({
    label: shortBackendLabel(r.backend), value: r.tokensPerS, cls: seriesClass(r.backend, i), title: armLabel(r, labelOf(r.backend)),
    text: `${formatNumber(r.tokensPerS, 0)}${ratioOf(r.backend)?.speedup ? ` (${formatRatio(ratioOf(r.backend)?.speedup)})` : ''}`,
  }));
  const memBars: Bar[] = ran.map((r, i) => ({
    label: shortBackendLabel(r.backend), value: r.peakMemoryBytes, cls: seriesClass(r.backend, i), text: formatBytes(r.peakMemoryBytes), title: labelOf(r.backend),
  }));
  const series = lossSeries(results);
  // Every value cell carries its column's name (data-label): in a narrow view the rows stack as cards that show it.
  // A loss check adds each arm's eval loss (batches it never trained on) after the final loss.
  const withEval = showsEvalLoss(results);
  const columns = ['tokens/s', 'step median', 'p90', 'peak memory', 'final loss', `speed vs ${vs}`, `memory vs ${vs}`, 'loss Δ', 'eval loss'];
  const cell = (i: number, text: string, cls = '') => h('td', { 'data-label': columns[i], class: cls || undefined }, text);
  const table = h('table', { class: 'results-table' },
    h('thead', {}, h('tr', {}, ...['Backend', ...(withEval ? columns : columns.slice(0, -1))].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, ...ordered(results).map((r) => {
      if (r.skippedReason) return h('tr', { class: 'skipped' }, h('th', { scope: 'row' }, labelOf(r.backend)), h('td', { colspan: withEval ? 9 : 8 }, `skipped: ${r.skippedReason}`));
      const ratio = ratioOf(r.backend);
      const base = r.backend === baseline;
      return h('tr', {},
        h('th', { scope: 'row', title: [r.label, r.recipe].filter(Boolean).join(' · ') || undefined }, armLabel(r, labelOf(r.backend)), r.emulated ? h('span', { class: 'muted' }, ' (emulated)') : null),
        cell(0, formatNumber(r.tokensPerS, 0)),
        cell(1, formatMs(r.stepTimeMedianMs)),
        cell(2, formatMs(r.stepTimeP90Ms)),
        cell(3, formatBytes(r.peakMemoryBytes)),
        cell(4, formatNumber(finalLoss(r.losses), 4)),
        cell(5, base ? 'baseline' : formatRatio(ratio?.speedup), ratio?.speedup !== undefined ? (ratio.speedup >= 1 ? 'good' : 'bad') : ''),
        // The baseline's ratio cells are blank where the eval loss follows them (kept for the columns' alignment).
        base ? (withEval ? cell(6, '', 'blank') : null) : cell(6, formatRatio(ratio?.memory)),
        base ? (withEval ? cell(7, '', 'blank') : null) : cell(7, formatDelta(ratio?.finalLossDelta)),
        withEval ? cell(8, evalLossText(r), 'eval-loss') : null,
      );
    })),
  );
  // An A/B run's verdicts head the block: against torchao on the original, and the loss check's.
  const ab = baseline !== BASELINE_BACKEND;
  const vsPeer = ab ? peerVerdict(results) : undefined;
  const verdict = ab ? lossVerdict(results) : undefined;
  return h('div', { class: 'result-block' },
    h('div', { class: 'card-head' }, h('h2', {}, title), h('div', { class: 'actions' }, button('Copy as Markdown', copy, { class: 'link' }))),
    vsPeer ? h('p', { class: 'peer-verdict', role: 'note' }, vsPeer) : null,
    verdict ? h('p', { class: 'loss-verdict', role: 'note' }, verdict) : null,
    ran.length > 0 ? h('h3', {}, 'Throughput (tokens/s)') : null,
    ran.length > 0 ? barChart(tpsBars, { width: chartWidth, label: `tokens per second: ${tpsBars.map((b) => `${b.label} ${b.text}`).join(', ')}` }) : null,
    ran.some((r) => r.peakMemoryBytes !== undefined) ? h('h3', {}, 'Peak memory') : null,
    ran.some((r) => r.peakMemoryBytes !== undefined) ? barChart(memBars, { width: chartWidth, label: `peak memory: ${memBars.map((b) => `${b.label} ${b.text}`).join(', ')}` }) : null,
    series.length > 0 ? h('h3', {}, 'Loss') : null,
    series.length > 0 ? lineChart(series, { width: chartWidth, label: 'loss per step for each backend', xLabel: 'step', marker: measuredFrom(ran) }) : null,
    series.length > 0 ? legend(series) : null,
    h('div', { class: 'table-wrap' }, table),
    baseline === BASELINE_BACKEND ? null : abLines(results, conversion),
    ran.some((r) => r.emulated) ? h('p', { class: 'banner warning' }, 'FP8 was emulated on this machine: these figures test the harness, they are not a benchmark.') : null,
    skipped.length > 0 ? h('p', { class: 'muted' }, `${skipped.length} backend${skipped.length > 1 ? 's' : ''} skipped.`) : null,
  );
}

function renderResults(run: RunState): void {
  const show = run.results.length > 0 && persisted.selected.length === 0;
  sections.results.hidden = !show && run.warnings.length === 0 && !(isActive(run) && run.conversion);
  const title = run.status === 'done' ? `Results${run.options ? `: ${isAbRun(run.options) ? 'A/B of ' : ''}${run.options.workload}` : ''}` : isActive(run) ? 'Results so far' : 'Partial results';
  fill(sections.results,
    run.warnings.length > 0 ? h('div', { class: 'banner' }, h('strong', {}, 'Notes'), h('ul', {}, ...run.warnings.map((w) => h('li', {}, w)))) : null,
    show ? resultsBlock(run.results, run.ratios, title, () => send({ type: 'copyCurrentMarkdown' }), run.conversion) : null,
    !show && isActive(run) && run.conversion ? h('p', { class: 'muted' }, conversionLine(run.conversion)) : null,
  );
}

// ---------------------------------------------------------------------------------------------------------------
// History and comparison

function entrySummary(e: HistoryEntry): string {
  const ratios = e.ratios.length > 0 ? e.ratios : computeRatios(e.results);
  const inference = runMode(e.options) === 'inference';
  const reference = (b: string) => e.results.some((r) => r.backend === b && r.inference?.referenceOnly);
  const speed = inference
    ? ratios.filter((r) => r.decodeSpeedup !== undefined && !reference(r.backend)).map((r) => `${r.backend} decode ${formatRatio(r.decodeSpeedup)}`).join(', ')
    : ratios.filter((r) => r.speedup !== undefined).map((r) => `${r.backend} ${formatRatio(r.speedup)}`).join(', ');
  if (isAbRun(e.options)) return [e.gpu ?? 'GPU unknown', e.hostname && e.remoteName ? `on ${e.hostname}` : undefined, speed ? `vs original: ${speed}` : 'no ratio'].filter(Boolean).join(' · ');
  return [e.gpu ?? 'GPU unknown', e.hostname && e.remoteName ? `on ${e.hostname}` : undefined, speed || 'no FP8 ratio'].filter(Boolean).join(' · ');
}

function toggleSelected(id: string, on: boolean): void {
  const selected = persisted.selected.filter((s) => s !== id);
  if (on) {
    selected.push(id);
    while (selected.length > 2) selected.shift();
  }
  persisted.selected = selected;
  save();
  if (host) render(host);
}

/** An import or a finished run: the host asks for those runs to be selected and shown (once per request). */
function applySelection(state: BenchmarkViewState): void {
  const request = state.selection;
  if (!request || request.serial === persisted.selectionSerial) return;
  persisted.selectionSerial = request.serial;
  const ids = request.ids.filter((id) => state.history.some((e) => e.id === id));
  if (ids.length === 0) return;
  persisted.selected = ids.slice(-2);
  window.setTimeout(() => sections.details.scrollIntoView({ block: 'start', behavior: 'smooth' }), 0);
}

function renderHistory(state: BenchmarkViewState): void {
  const entries = state.history;
  persisted.selected = persisted.selected.filter((id) => entries.some((e) => e.id === id));
  const list = h('ul', { class: 'history-list' }, ...entries.map((e) => {
    const checked = persisted.selected.includes(e.id);
    const id = `sel-${e.id}`;
    return h('li', { class: checked ? 'selected' : '' },
      h('input', { type: 'checkbox', id, checked, 'aria-label': `Select run of ${formatTimestamp(e.startedAt)}`, on: { change: (ev) => toggleSelected(e.id, (ev.target as HTMLInputElement).checked) } }),
      h('label', { for: id },
        h('span', { class: 'when' }, formatTimestamp(e.startedAt)),
        abBadge(e.options, e.results) ? h('span', {
          class: 'badge',
          title: isLossCheckRun(e.options, e.results) ? 'A/B run with the loss check: eval loss of each arm, BF16 run twice for the noise floor' : 'A/B run: the project as it is against its converted copy',
        }, ` ${abBadge(e.options, e.results)}`) : null,
        h('span', {}, runMode(e.options) === 'inference'
          ? ` ${e.options.workload} · inference b${e.options.batch}×${e.options.promptLen ?? '?'}+${e.options.newTokens ?? '?'}`
          : ` ${e.options.workload} · b${e.options.batch}×${e.options.seq}${e.options.compile ? '' : ' · eager'}`),
        h('span', { class: 'muted block' }, entrySummary(e))),
      h('span', { class: 'row-actions' },
        button('Copy', () => send({ type: 'copyMarkdown', runIds: [e.id] }), { class: 'link', title: 'Copy this run as Markdown' }),
        button('Delete', () => send({ type: 'deleteRun', id: e.id }), { class: 'link', title: 'Remove from the history' })),
    );
  }));
  fill(sections.history,
    h('div', { class: 'card-head' }, h('h2', {}, `History (${entries.length})`)),
    state.historyMessage ? h('p', { class: 'banner warning' }, state.historyMessage) : null,
    entries.length === 0 ? h('p', { class: 'muted' }, 'Finished runs are kept here. Select one to see it again, two to compare them side by side.') : h('p', { class: 'muted' }, 'Select one run to see it, two to compare.'),
    entries.length > 0 ? list : null,
  );
}

function compareBlock(a: HistoryEntry, b: HistoryEntry): HTMLElement {
  const backends = [...new Set([...ordered(a.results), ...ordered(b.results)].map((r) => r.backend))];
  const get = (e: HistoryEntry, backend: string) => e.results.find((r) => r.backend === backend && !r.skippedReason);
  const ratio = (x?: number, y?: number) => (x !== undefined && y !== undefined && x !== 0 ? formatRatio(y / x) : '–');
  // One small table per backend (metric, A, B, B / A): four columns fit a narrow sidebar without a rowspan to stack.
  const tables: HTMLElement[] = [];
  for (const backend of backends) {
    const ra = get(a, backend);
    const rb = get(b, backend);
    const fa = ra?.inference;
    const fb = rb?.inference;
    const metrics: Array<[string, string, string, string]> = fa || fb ? [
      ['prefill tokens/s', formatNumber(fa?.prefillTokensPerS, 0), formatNumber(fb?.prefillTokensPerS, 0), ratio(fa?.prefillTokensPerS, fb?.prefillTokensPerS)],
      ['decode tokens/s', formatNumber(fa?.decodeTokensPerS, 0), formatNumber(fb?.decodeTokensPerS, 0), ratio(fa?.decodeTokensPerS, fb?.decodeTokensPerS)],
      ['peak memory', formatBytes(ra?.peakMemoryBytes), formatBytes(rb?.peakMemoryBytes), ratio(ra?.peakMemoryBytes, rb?.peakMemoryBytes)],
      ...(backend !== BASELINE_BACKEND ? [['next-token agreement', pct(fa?.nextTokenAgreement), pct(fb?.nextTokenAgreement), ''] as [string, string, string, string]] : []),
    ] : [
      ['tokens/s', formatNumber(ra?.tokensPerS, 0), formatNumber(rb?.tokensPerS, 0), ratio(ra?.tokensPerS, rb?.tokensPerS)],
      ['step median', formatMs(ra?.stepTimeMedianMs), formatMs(rb?.stepTimeMedianMs), ratio(ra?.stepTimeMedianMs, rb?.stepTimeMedianMs)],
      ['peak memory', formatBytes(ra?.peakMemoryBytes), formatBytes(rb?.peakMemoryBytes), ratio(ra?.peakMemoryBytes, rb?.peakMemoryBytes)],
      ['final loss', formatNumber(finalLoss(ra?.losses), 4), formatNumber(finalLoss(rb?.losses), 4), ''],
    ];
    if (backend !== BASELINE_BACKEND && !fa && !fb) {
      const sa = (a.ratios.length ? a.ratios : computeRatios(a.results)).find((r) => r.backend === backend)?.speedup;
      const sb = (b.ratios.length ? b.ratios : computeRatios(b.results)).find((r) => r.backend === backend)?.speedup;
      metrics.push(['vs BF16', formatRatio(sa), formatRatio(sb), '']);
    }
    tables.push(h('div', { class: 'table-wrap' }, h('table', { class: 'compare' },
      h('caption', {}, labelOf(backend)),
      h('thead', {}, h('tr', {}, ...['Metric', 'A', 'B', 'B / A'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, ...metrics.map(([metric, va, vb, r]) => h('tr', {},
        h('th', { scope: 'row' }, metric), h('td', {}, va), h('td', {}, vb), h('td', {}, r)))))));
  }
  const bars: Bar[] = [];
  backends.forEach((backend, i) => {
    for (const [tag, e, extra] of [['A', a, ''], ['B', b, ' run-b']] as const) {
      const r = get(e, backend);
      const value = r?.inference ? r.inference.decodeTokensPerS : r?.tokensPerS;
      if (r && !r.inference?.referenceOnly) bars.push({ label: `${shortBackendLabel(backend)} · ${tag}`, value, cls: `${seriesClass(backend, i)}${extra}`, text: formatNumber(value, 0) });
    }
  });
  const series = [...lossSeries(a.results, ' · A'), ...lossSeries(b.results, ' · B', ' run-b')];
  const describe = (tag: string, e: HistoryEntry) => h('li', {}, h('strong', {}, `${tag}: `), `${formatTimestamp(e.startedAt)} · ${e.options.workload} · ${settingsText(e.options)}${e.gpu ? ` · ${e.gpu}` : ''}`);
  return h('div', { class: 'result-block' },
    h('div', { class: 'card-head' }, h('h2', {}, 'Comparison'), h('div', { class: 'actions' },
      button('Copy as Markdown', () => send({ type: 'copyMarkdown', runIds: [a.id, b.id] }), { class: 'link' }),
      button('Clear', () => { persisted.selected = []; save(); if (host) render(host); }, { class: 'link' }))),
    h('ul', { class: 'plain' }, describe('A', a), describe('B', b)),
    h('h3', {}, isInference([...a.results, ...b.results]) ? 'Decode (tokens/s)' : 'Throughput (tokens/s)'),
    barChart(bars, { width: chartWidth, label: `tokens per second, A and B: ${bars.map((x) => `${x.label} ${x.text}`).join(', ')}` }),
    series.length > 0 ? h('h3', {}, 'Loss') : null,
    series.length > 0 ? lineChart(series, { width: chartWidth, label: 'loss per step, runs A and B', xLabel: 'step' }) : null,
    series.length > 0 ? legend(series) : null,
    ...tables,
  );
}

/** A run's settings in one line. */
function settingsText(o: RunOptions): string {
  return runMode(o) === 'inference'
    ? `inference · batch ${o.batch} × ${o.promptLen ?? '?'} prompt + ${o.newTokens ?? '?'} new tokens · median of ${o.repeats ?? '?'}`
    : `batch ${o.batch} × seq ${o.seq} · ${o.steps} steps (${o.warmup} warm-up) · compile ${o.compile ? 'on' : 'off'}`;
}

function renderDetails(state: BenchmarkViewState): void {
  const chosen = persisted.selected.map((id) => state.history.find((e) => e.id === id)).filter((e): e is HistoryEntry => !!e);
  sections.details.hidden = chosen.length === 0;
  if (chosen.length === 0) {
    fill(sections.details);
    return;
  }
  if (chosen.length === 1) {
    const e = chosen[0];
    fill(sections.details,
      resultsBlock(e.results, e.ratios, `${isAbRun(e.options) ? 'A/B run' : 'Run'} of ${formatTimestamp(e.startedAt)}: ${e.options.workload}`, () => send({ type: 'copyMarkdown', runIds: [e.id] }), e.conversion),
      h('p', { class: 'muted' }, `${settingsText(e.options)}${e.torchVersion ? ` · torch ${e.torchVersion}` : ''} · TE ${e.teVersion ?? 'not installed'}`,
        e.interpreter ? h('span', {}, ', ', h('code', { class: 'path' }, e.interpreter)) : null),
    );
    return;
  }
  // Older run first: "B / A" then reads as "how the newer run changed things".
  const [a, b] = [...chosen].sort((x, y) => x.startedAt - y.startedAt);
  sections.details.replaceChildren(compareBlock(a, b));
}

// ---------------------------------------------------------------------------------------------------------------

function render(state: BenchmarkViewState): void {
  renderTrust(state);
  renderEnv(state);
  syncForm(state);
  renderProgress(state.run);
  renderError(state.run);
  renderHistory(state);
  renderDetails(state);
  renderResults(state.run);
}

window.addEventListener('message', (event: MessageEvent<HostToWebviewMessage>) => {
  const message = event.data;
  if (!message || typeof message !== 'object') return;
  switch (message.type) {
    case 'state':
      host = message.state;
      persisted.host = message.state;
      applySelection(message.state);
      save();
      render(message.state);
      break;
    case 'progress':
      if (host && host.run.id === message.runId) {
        host = { ...host, run: { ...host.run, status: message.status, progress: message.progress } };
        renderProgress(host.run);
        syncButtons();
      }
      break;
    case 'notice':
      break;
  }
});

// Charts are drawn at the view's pixel width (crisp text at any sidebar size): redraw when it changes.
new ResizeObserver(() => {
  const width = Math.max(200, app.clientWidth - 4);
  if (Math.abs(width - chartWidth) < 8) return;
  chartWidth = width;
  if (host) {
    renderDetails(host);
    renderResults(host.run);
  }
}).observe(app);

if (host) render(host);
send({ type: 'ready' });
