/**
 * The extension-host side of the benchmark: it owns `BenchmarkViewState` (the webview only renders it), probes the
 * environment, runs and cancels the benchmark, keeps the history and writes the benchmark log.
 */
import { mkdirSync } from 'node:fs';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { BenchEvent, EnvInfo, InferenceFigures, WorkloadInfo } from '../../../common/bench-events';
import { evalLossOf, LOSS_CHECK_ARMS, lossCheckSteps, ROUNDED_ARM } from '../../../common/loss-check';
import {
  BenchmarkViewState, DEFAULT_RUN_OPTIONS, HistoryEntry, HostToWebviewMessage, isAbRun, RunOptions, runBackends, runMode, sanitizeRunOptions, UserError,
} from '../../../common/webview-messages';
import { abBlockedReason, backendChoices, RUN_BLOCKED_NO_FOLDER, inferenceBackendChoices, runBlockedReason } from './availability';
import { formatBytes, formatMs, formatNumber, formatRatio } from './format';
import { HistoryStore } from './historyStore';
import { ImportError, jsonOutToHistoryEntry, parseJsonOutText } from './importResults';
import { findInterpreters, onPythonSelectionChanged, resolveInterpreter } from './interpreter';
import { pickInterpreter } from './interpreterPicker';
import { abVerdicts } from './ab';
import { compareRunsToMarkdown, runToMarkdown } from './markdown';
import {
  BenchmarkInvocation, BenchmarkOutcome, BenchmarkProcess, buildListWorkloadsArgs, buildMeasureArgs, buildProbeArgs, buildRunArgs, outcomeToUserError,
  startBenchmark,
} from './runner';
import { applyRunEvent, environmentSummary, finishRun, idleRunState, startedRunState, toHistoryEntry, toUserError } from './state';

type ProgressMessage = Extract<HostToWebviewMessage, { type: 'progress' }>;

const PROBE_TIMEOUT_MS = 120_000;
const LAST_OPTIONS_KEY = 'precisionLens.benchmark.lastOptions';
/** The A/B workload (module:function) last used, per workspace (workspaceState). */
export const AB_WORKLOAD_KEY = 'precisionLens.benchmark.abWorkload';
const MODULE_FUNCTION = /^[A-Za-z_][\w.]*:[A-Za-z_]\w*$/;
const PROGRESS_INTERVAL_MS = 100;

/** Presets offered before (or when) `--list-workloads` answers. */
export const FALLBACK_WORKLOADS: WorkloadInfo[] = [
  { name: 'gpt-125m', description: 'GPT-2 small shape', batch: 16, seq: 1024 },
  { name: 'gpt-1.3b', description: 'GPT-3 XL shape', batch: 8, seq: 2048 },
  { name: 'llama-7b-slice', description: 'Llama-3-8B / Mistral-7B block shape, 12 layers', batch: 4, seq: 4096 },
  { name: 'llama-70b-slice', description: 'Llama-70B block shape, 4 layers', batch: 2, seq: 4096 },
];

export interface ControllerDeps {
  context: vscode.ExtensionContext;
  /** Extension logs. */
  log: vscode.LogOutputChannel;
  /** The benchmark's own stderr and a line per event, coloured by the benchmark-log grammar. */
  benchLog: vscode.OutputChannel;
  history: HistoryStore;
}

export class BenchmarkController implements vscode.Disposable {
  private state: BenchmarkViewState;
  private current: BenchmarkProcess | undefined;
  /** Set from the moment `run` accepts until the process exits: a second run is refused in between. */
  private busy = false;
  private probes: BenchmarkProcess[] = [];
  private probeGeneration = 0;
  private readonly stateEmitter = new vscode.EventEmitter<BenchmarkViewState>();
  private readonly progressEmitter = new vscode.EventEmitter<ProgressMessage>();
  private progressTimer: NodeJS.Timeout | undefined;
  private pendingProgress: ProgressMessage | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  /** Fires with the whole state after every change that is more than progress. */
  readonly onDidChangeState = this.stateEmitter.event;
  /** Fires (throttled) while a run makes progress. */
  readonly onDidProgress = this.progressEmitter.event;

  constructor(private readonly deps: ControllerDeps) {
    const saved = deps.context.globalState.get<unknown>(LAST_OPTIONS_KEY);
    this.state = withAvailability({
      trusted: vscode.workspace.isTrusted,
      remote: vscode.env.remoteName ? { name: vscode.env.remoteName } : undefined,
      environment: { status: 'unknown' },
      backends: [],
      inferenceBackends: [],
      workloads: FALLBACK_WORKLOADS,
      lastOptions: saved ? sanitizeRunOptions(saved, DEFAULT_RUN_OPTIONS) : DEFAULT_RUN_OPTIONS,
      workspaceFolder: this.workspaceFolder()?.fsPath,
      abWorkload: deps.context.workspaceState.get<string>(AB_WORKLOAD_KEY),
      run: idleRunState(),
      history: [],
    });
    this.disposables.push(this.stateEmitter, this.progressEmitter, onPythonSelectionChanged(() => void this.refreshEnvironment()));
  }

  /** Loads the history, then starts the environment probe (when trusted) without waiting for it. */
  async initialize(): Promise<void> {
    const loaded = await this.deps.history.load();
    if (loaded.message) this.deps.log.warn(loaded.message);
    this.update({ history: loaded.entries, historyMessage: loaded.message });
    void this.refreshEnvironment().catch((e: unknown) => this.deps.log.error(`benchmark: environment check failed: ${String(e)}`));
  }

  /** A deep copy of the host-side state (the e2e tests read it through precisionLens.benchmark.getState). */
  getState(): BenchmarkViewState {
    return JSON.parse(JSON.stringify(this.state)) as BenchmarkViewState;
  }

  get isRunning(): boolean {
    return this.busy;
  }

  /** The workspace folder runs use: the active editor's folder, else the first one. */
  private workspaceFolder(): vscode.Uri | undefined {
    const active = vscode.window.activeTextEditor?.document.uri;
    const folder = (active && vscode.workspace.getWorkspaceFolder(active)) ?? vscode.workspace.workspaceFolders?.[0];
    return folder?.uri;
  }

  private scriptPath(): string {
    return this.deps.context.asAbsolutePath(path.join('bench', 'benchmark.py'));
  }

  private update(patch: Partial<BenchmarkViewState>): void {
    this.state = withAvailability({ ...this.state, ...patch });
    this.stateEmitter.fire(this.state);
  }

  /** Asks the view to select and show these history runs (an import, a finished run). */
  private selectRuns(ids: string[]): Partial<BenchmarkViewState> {
    return { selection: { ids: ids.slice(-2), serial: Math.max(Date.now(), (this.state.selection?.serial ?? 0) + 1) } };
  }

  /** "Choose interpreter…": the quick pick of the interpreters found; the setting it writes triggers a new probe. */
  async chooseInterpreter(): Promise<string | undefined> {
    const folder = this.workspaceFolder();
    return pickInterpreter({
      find: async () => {
        const candidates = await findInterpreters(folder, this.deps.log);
        this.update({ interpreters: { candidates, pickerOpen: this.state.interpreters?.pickerOpen ?? false } });
        return candidates;
      },
      current: () => this.state.interpreter,
      setOpen: (open) => this.update({ interpreters: { candidates: this.state.interpreters?.candidates ?? [], pickerOpen: open } }),
      log: this.deps.log,
    });
  }

  /** Called when workspace trust is granted. */
  setTrusted(trusted: boolean): void {
    if (this.state.trusted === trusted) return;
    this.update({ trusted });
    if (trusted) void this.refreshEnvironment();
  }

  /** Re-resolves the interpreter and asks it about torch, CUDA, the GPU and TE; also lists the workload presets. */
  async refreshEnvironment(): Promise<void> {
    const generation = ++this.probeGeneration;
    for (const p of this.probes) void p.cancel();
    this.probes = [];
    const folder = this.workspaceFolder();
    const interpreter = await resolveInterpreter(folder, this.deps.log);
    if (generation !== this.probeGeneration) return;
    this.deps.log.info(`benchmark interpreter: ${interpreter.path} (${interpreter.detail})`);
    if (!this.state.trusted) {
      this.update({
        interpreter,
        workspaceFolder: folder?.fsPath,
        environment: { status: 'unknown', summary: 'The workspace is not trusted: the benchmark and the environment check are disabled.' },
      });
      return;
    }
    const script = this.scriptPath();
    if (!fs.existsSync(script)) {
      this.update({
        interpreter,
        workspaceFolder: folder?.fsPath,
        environment: {
          status: 'failed',
          error: { code: 'missing_script', title: 'Benchmark script missing', message: `${script} is not part of this installation.`, hint: 'Reinstall the extension.' },
        },
      });
      return;
    }
    // A different interpreter: what the last one reported no longer holds.
    const previous = this.state.interpreter?.path === interpreter.path ? this.state.environment : {};
    this.update({ interpreter, workspaceFolder: folder?.fsPath, environment: { ...previous, status: 'probing' } });

    let env: EnvInfo | undefined;
    let probeError: UserError | undefined;
    const probe = startBenchmark(
      { command: interpreter.path, args: buildProbeArgs(script, folder?.fsPath), cwd: folder?.fsPath },
      {
        onEvent: (e) => {
          if (e.event === 'env') env = e;
          else if (e.event === 'error' && !probeError) probeError = toUserError(e.code, e.message, e.hint);
        },
        onStderr: (line) => this.deps.log.debug(`probe: ${line}`),
        onStdoutText: (line) => this.deps.log.debug(`probe stdout: ${line}`),
      },
      { timeoutMs: PROBE_TIMEOUT_MS },
    );
    const list = startBenchmark(
      { command: interpreter.path, args: buildListWorkloadsArgs(script), cwd: folder?.fsPath },
      { onEvent: (e) => e.event === 'workloads' && e.workloads.length > 0 && this.update({ workloads: e.workloads }) },
      { timeoutMs: PROBE_TIMEOUT_MS },
    );
    this.probes = [probe, list];
    const [outcome] = await Promise.all([probe.done, list.done]);
    if (generation !== this.probeGeneration) return;
    this.probes = [];
    if (env) {
      this.deps.log.info(`benchmark environment: ${environmentSummary(env)}`);
      this.update({
        environment: { status: 'ready', info: env, summary: environmentSummary(env), error: env.torchVersion ? undefined : probeError },
        remote: this.state.remote ? { ...this.state.remote, hostname: env.hostname } : undefined,
      });
    } else {
      const error = probeError ?? outcomeToUserError(outcome, interpreter.path) ?? {
        code: 'no_env', title: 'No environment report', message: 'The benchmark probe ended without describing the environment.', hint: 'Open the benchmark log for details.',
      };
      this.deps.log.warn(`benchmark probe failed: ${error.title}: ${error.message}`);
      this.update({ environment: { status: 'failed', error, summary: error.title } });
    }
  }

  /** Starts a run; false (with a message) when one is already running or the workspace is untrusted. */
  async run(raw?: unknown): Promise<boolean> {
    if (this.busy) {
      void vscode.window.showWarningMessage('A benchmark is already running. Cancel it first, or wait for it to finish.');
      return false;
    }
    if (!vscode.workspace.isTrusted) {
      void vscode.window.showWarningMessage('The benchmark runs a Python interpreter and workspace code: trust this workspace to use it.');
      return false;
    }
    this.busy = true;
    try {
      return await this.startRun(raw);
    } catch (e) {
      this.busy = false;
      throw e;
    }
  }

  private async startRun(raw: unknown): Promise<boolean> {
    const remembered = sanitizeRunOptions(raw ?? this.state.lastOptions, this.state.lastOptions);
    void this.deps.context.globalState.update(LAST_OPTIONS_KEY, remembered);
    // The form's "Loss check" box belongs to Measure conversion: a preset run is no loss check (nor recorded as one).
    const { lossCheck: _lossCheck, ...options } = remembered;
    const folder = this.workspaceFolder();
    const interpreter = this.state.interpreter ?? (await resolveInterpreter(folder, this.deps.log));
    const { id, jsonOut } = this.newRunFiles();
    const args = buildRunArgs(this.scriptPath(), options, { jsonOut, workspace: folder?.fsPath });
    this.update({ lastOptions: remembered, interpreter });
    this.launch(id, options, { command: interpreter.path, args, cwd: folder?.fsPath }, interpreter.path, jsonOut);
    return true;
  }

  /** A new run's id and the --json-out file it writes (undefined when the storage folder cannot be made). */
  private newRunFiles(): { id: string; jsonOut: string | undefined } {
    const id = `${new Date().toISOString().replace(/[:.]/g, '-')}-${Math.random().toString(36).slice(2, 6)}`;
    const runsDir = path.join(this.deps.context.globalStorageUri.fsPath, 'runs');
    try {
      mkdirSync(runsDir, { recursive: true });
      return { id, jsonOut: path.join(runsDir, `${id}.json`) };
    } catch {
      return { id, jsonOut: undefined };
    }
  }

  /** Starts the process of a run (the benchmark, or `precision-lens measure` for an A/B) and follows it to its end. */
  private launch(id: string, options: RunOptions, invocation: BenchmarkInvocation, interpreter: string, jsonOut: string | undefined): void {
    this.update({ run: startedRunState(id, options, Date.now()) });
    const benchLog = this.deps.benchLog;
    benchLog.appendLine(`[${new Date().toLocaleTimeString()}] run ${id}: ${invocation.command} ${invocation.args.map(quoteArg).join(' ')}`);
    this.deps.log.info(`benchmark run ${id} started (${isAbRun(options) ? 'A/B of the workspace project' : runMode(options)}, ${options.workload}${isAbRun(options) ? '' : `, ${runBackends(options).join(',')}`})`);
    let lastPhase = '';
    const child = startBenchmark(invocation, {
      onEvent: (event) => this.onRunEvent(id, event, (phase) => {
        if (phase === lastPhase) return;
        lastPhase = phase;
        benchLog.appendLine(`phase: ${phase}`);
      }),
      onStderr: (line) => benchLog.appendLine(line),
      onStdoutText: (line) => benchLog.appendLine(line),
    });
    this.current = child;
    void child.done.then((outcome) => this.onRunExit(id, outcome, interpreter, jsonOut));
  }

  /**
   * "Measure conversion": the A/B of the workspace's own project. Asks for the workload (module:function; remembered
   * per workspace) unless `raw.workload` names one, then runs the bundled `precision-lens measure` (out/cli.js: the
   * copy, its conversion with check --fix --unsafe-fixes, and bench/benchmark.py --mode ab) with the run's progress,
   * cancel, result and history like any run. The form's steps, warm-up, batch, sequence length and compile apply;
   * `raw.lossCheck` (the form's "Loss check" box) makes it `measure --loss-check` (at least 200 steps).
   */
  async measureConversion(raw?: unknown): Promise<boolean> {
    if (this.busy) {
      void vscode.window.showWarningMessage('A benchmark is already running. Cancel it first, or wait for it to finish.');
      return false;
    }
    if (!vscode.workspace.isTrusted) {
      void vscode.window.showWarningMessage('Measure conversion runs a Python interpreter and your project\'s code: trust this workspace to use it.');
      return false;
    }
    const folder = this.workspaceFolder();
    if (!folder) {
      void vscode.window.showWarningMessage(RUN_BLOCKED_NO_FOLDER);
      return false;
    }
    this.busy = true;
    try {
      const r = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
      let workload = typeof r.workload === 'string' && MODULE_FUNCTION.test(r.workload.trim()) && r.prompt !== true ? r.workload.trim() : undefined;
      if (!workload) {
        const suggested = this.state.abWorkload ?? (typeof r.workload === 'string' && MODULE_FUNCTION.test(r.workload.trim()) ? r.workload.trim() : undefined);
        workload = (await vscode.window.showInputBox({
          title: 'Measure conversion: your training step before and after the FP8 conversion',
          prompt: 'The function in your project that builds the model, as module:function (bench/README.md says what it returns)',
          placeHolder: 'mypkg.model:build_model',
          value: suggested,
          ignoreFocusOut: true,
          validateInput: (v) => (MODULE_FUNCTION.test(v.trim()) ? undefined : 'module:function, e.g. mypkg.model:build_model'),
        }))?.trim();
        if (!workload) {
          this.busy = false;
          return false;
        }
      }
      void this.deps.context.workspaceState.update(AB_WORKLOAD_KEY, workload);
      const base = sanitizeRunOptions({ ...r, workload: undefined, mode: 'train' }, this.state.lastOptions);
      // The loss check (`--loss-check`): measure's training recipe for at least 200 steps, the torchao peer left out,
      // the BF16 arm run again for the noise floor. The options record the steps that run (the history says so).
      const options: RunOptions = base.lossCheck
        ? { ...base, mode: 'train', workload, ab: true, lossCheck: true, steps: lossCheckSteps(base.steps), backends: [...LOSS_CHECK_ARMS, ...(base.roundedStart ? [ROUNDED_ARM] : [])] }
        : { ...base, mode: 'train', workload, ab: true, backends: ['original', 'converted', 'torchao-original'] };
      const interpreter = this.state.interpreter ?? (await resolveInterpreter(folder, this.deps.log));
      const { id, jsonOut } = this.newRunFiles();
      const cli = this.deps.context.asAbsolutePath(path.join('out', 'cli.js'));
      // The conversion measured is the one the user's settings make (layers predicted to lose stay BF16 by default).
      const convertLosingLayers = vscode.workspace.getConfiguration('precisionLens', folder).get<boolean>('convertLosingLayers') === true;
      const args = buildMeasureArgs(cli, folder.fsPath, options, { python: interpreter.path, jsonOut, convertLosingLayers });
      this.update({ interpreter, abWorkload: workload });
      // The extension host's own runtime runs the bundled CLI (in desktop VS Code it is Electron: run it as Node).
      this.launch(id, options, { command: process.execPath, args, cwd: folder.fsPath, env: { ELECTRON_RUN_AS_NODE: '1' } }, interpreter.path, jsonOut);
      return true;
    } catch (e) {
      this.busy = false;
      throw e;
    }
  }

  private onRunEvent(id: string, event: BenchEvent, onPhase: (phase: string) => void): void {
    if (this.state.run.id !== id) return;
    const run = applyRunEvent(this.state.run, event);
    switch (event.event) {
      case 'progress':
        onPhase(`${event.phase}${event.backend ? ` (${event.backend})` : ''}`);
        this.state = { ...this.state, run };
        this.queueProgress({ type: 'progress', runId: id, status: run.status, progress: run.progress ?? { phase: event.phase } });
        return;
      case 'env':
        this.update({
          run,
          environment: { status: 'ready', info: event, summary: environmentSummary(event) },
          remote: this.state.remote ? { ...this.state.remote, hostname: event.hostname } : undefined,
        });
        return;
      case 'result': {
        const ratio = run.ratios.find((r) => r.backend === event.backend);
        this.deps.benchLog.appendLine(
          event.skippedReason
            ? `result ${event.backend}: skipped: ${event.skippedReason}`
            : event.inference
              ? `result ${event.backend}: ${inferenceLogLine(event.inference, event.peakMemoryBytes)}${ratio?.decodeSpeedup !== undefined ? `, decode ${formatRatio(ratio.decodeSpeedup)} vs BF16` : ''}`
              : `result ${event.backend}: ${formatNumber(event.tokensPerS, 0)} tokens/s, step ${formatMs(event.stepTimeMedianMs)} (p90 ${formatMs(event.stepTimeP90Ms)}), peak ${formatBytes(event.peakMemoryBytes)}${ratio ? `, ${formatRatio(ratio.speedup)} vs ${isAbRun(run.options) ? 'original' : 'BF16'}` : ''}${evalLossOf(event) !== undefined ? `, eval loss ${formatNumber(evalLossOf(event), 4)}` : ''}`,
        );
        this.update({ run });
        return;
      }
      case 'error':
        // Not echoed: the benchmark prints each error on its stderr, which is already in the benchmark log.
        this.update({ run });
        return;
      case 'cancelled':
        this.deps.benchLog.appendLine(`cancelled${event.signal ? ` by ${event.signal}` : ''}${event.phase ? ` during ${event.phase}` : ''}${event.backend ? ` (${event.backend})` : ''}`);
        this.update({ run });
        return;
      default:
        if (event.event === 'unknown' && event.name === 'conversion' && run.conversion) {
          this.deps.benchLog.appendLine(`conversion: ${run.conversion.applied} fixes in ${run.conversion.files} files`);
        }
        if (run !== this.state.run) this.update({ run });
    }
  }

  private queueProgress(message: ProgressMessage): void {
    this.pendingProgress = message;
    if (this.progressTimer) return;
    this.progressTimer = setTimeout(() => {
      this.progressTimer = undefined;
      const pending = this.pendingProgress;
      this.pendingProgress = undefined;
      if (pending && this.state.run.id === pending.runId && (this.state.run.status === 'running' || this.state.run.status === 'starting')) {
        this.progressEmitter.fire(pending);
      }
    }, PROGRESS_INTERVAL_MS);
  }

  private async onRunExit(id: string, outcome: BenchmarkOutcome, interpreter: string, jsonOut: string | undefined): Promise<void> {
    this.current = undefined;
    this.busy = false;
    if (this.state.run.id !== id) return;
    const hasResults = this.state.run.results.some((r) => !r.skippedReason);
    const reported = this.state.run.error !== undefined;
    const error = outcomeToUserError(outcome, interpreter, hasResults);
    const run = finishRun(this.state.run, { cancelled: outcome.cancelled, error }, Date.now());
    const seconds = ((run.finishedAt ?? Date.now()) - (run.startedAt ?? Date.now())) / 1000;
    this.deps.benchLog.appendLine(
      `[${new Date().toLocaleTimeString()}] run ${id} ${run.status}: ${outcome.cancelled ? 'cancelled' : outcome.exitCode !== null ? `exit code ${outcome.exitCode}` : `signal ${outcome.signal}`} after ${seconds.toFixed(1)} s`,
    );
    // Each failure once: an error the benchmark reported is in the log already (its stderr); only a failure the
    // extension found itself (the process died, no result) is written here.
    if (run.status === 'failed' && run.error && !reported) {
      this.deps.benchLog.appendLine(`error: ${run.error.title}: ${run.error.message}${run.error.hint ? ` -- ${run.error.hint}` : ''}`);
    }
    for (const ratio of run.ratios) this.deps.benchLog.appendLine(`ratio ${ratio.backend}/${isAbRun(run.options) ? 'original' : 'bf16'}: speed ${formatRatio(ratio.speedup)}, memory ${formatRatio(ratio.memory)}`);
    for (const verdict of abVerdicts(run.results)) this.deps.benchLog.appendLine(verdict);
    const entry = toHistoryEntry(run, {
      env: this.state.environment.info,
      interpreter,
      remoteName: this.state.remote?.name,
      jsonOut: jsonOut && fs.existsSync(jsonOut) ? jsonOut : undefined,
    });
    // The run's end, its history entry and its selection reach the view in one update: a reader that sees the run
    // finished sees it selected too (the e2e test read the state between two updates and found the old selection).
    if (!entry) {
      this.update({ run });
      return;
    }
    try {
      await this.deps.history.add(entry);
      this.update({ run, history: this.deps.history.entries, ...this.selectRuns([entry.id]) });
    } catch (e) {
      this.deps.log.error(`could not save the benchmark history: ${String(e)}`);
      this.update({ run, historyMessage: `This run could not be saved to the history: ${(e as Error).message}` });
    }
  }

  /**
   * Adds `bench/benchmark.py --json-out` files to the history as finished runs (an existing entry for the same file
   * content is replaced). Files that are not usable are reported, the others still imported. Returns the entries
   * added, in the order of `files`.
   */
  async importResults(files: readonly string[]): Promise<HistoryEntry[]> {
    const imported: HistoryEntry[] = [];
    const problems: string[] = [];
    for (const file of files) {
      try {
        const [text, stat] = await Promise.all([fs.promises.readFile(file, 'utf8'), fs.promises.stat(file)]);
        const { entry } = jsonOutToHistoryEntry(parseJsonOutText(text, file), { path: file, finishedAt: stat.mtimeMs });
        await this.deps.history.add(entry);
        imported.push(entry);
        const speed = entry.ratios.map((r) => `${r.backend} ${formatRatio(r.speedup)}`).join(', ');
        this.deps.log.info(`benchmark: imported ${file} (${entry.options.workload}${entry.gpu ? ` on ${entry.gpu}` : ''}${speed ? `, ${speed} vs ${isAbRun(entry.options) ? 'original' : 'BF16'}` : ''})`);
      } catch (e) {
        const why = e instanceof ImportError ? e.message : `${file}: ${(e as Error).message}`;
        this.deps.log.warn(`benchmark: import failed: ${why}`);
        problems.push(why);
      }
    }
    if (imported.length > 0) this.update({ history: this.deps.history.entries, ...this.selectRuns(imported.map((e) => e.id)) });
    if (problems.length > 0) void vscode.window.showErrorMessage(`Benchmark results not imported: ${problems.join(' ')}`);
    else if (imported.length > 0) {
      vscode.window.setStatusBarMessage(`Imported ${imported.length} benchmark run${imported.length === 1 ? '' : 's'} into the history`, 5000);
    }
    return imported;
  }

  /** Kills the running benchmark's process tree. */
  async cancel(): Promise<void> {
    const child = this.current;
    if (!child) return;
    if (this.state.run.status !== 'cancelling') this.update({ run: { ...this.state.run, status: 'cancelling', progress: { ...(this.state.run.progress ?? { phase: '' }), phase: 'cancelling' } } });
    this.deps.benchLog.appendLine(`[${new Date().toLocaleTimeString()}] cancelling run ${this.state.run.id}`);
    await child.cancel();
    await child.done;
  }

  /** Remembers the form values (so a reopened view shows what was last typed). */
  rememberOptions(raw: unknown): void {
    const options = sanitizeRunOptions(raw, this.state.lastOptions);
    this.state = { ...this.state, lastOptions: options };
    void this.deps.context.globalState.update(LAST_OPTIONS_KEY, options);
  }

  /** Markdown for one run (or two, compared side by side); undefined when the ids are unknown. */
  markdownFor(ids: readonly string[]): string | undefined {
    const entries = ids.map((id) => this.deps.history.get(id)).filter((e): e is HistoryEntry => e !== undefined);
    if (entries.length === 2) return compareRunsToMarkdown(entries[0], entries[1]);
    if (entries.length === 1) return runToMarkdown(entries[0]);
    return undefined;
  }

  /** Markdown for the run on screen (finished or partial). */
  currentMarkdown(): string | undefined {
    const run = this.state.run;
    if (!run.id || run.results.length === 0) return undefined;
    const saved = this.deps.history.get(run.id);
    if (saved) return runToMarkdown(saved);
    const entry = toHistoryEntry({ ...run, status: 'done' }, { env: this.state.environment.info, interpreter: this.state.interpreter?.path, remoteName: this.state.remote?.name });
    return entry ? runToMarkdown(entry) : undefined;
  }

  async copyMarkdown(markdown: string | undefined): Promise<void> {
    if (!markdown) {
      void vscode.window.showWarningMessage('Nothing to copy: no benchmark results.');
      return;
    }
    await vscode.env.clipboard.writeText(markdown);
    void vscode.window.setStatusBarMessage('Benchmark table copied as Markdown', 3000);
  }

  async deleteRun(id: string): Promise<void> {
    try {
      await this.deps.history.remove(id);
    } catch (e) {
      this.deps.log.error(`could not update the benchmark history: ${String(e)}`);
    }
    this.update({ history: this.deps.history.entries });
  }

  dispose(): void {
    if (this.progressTimer) clearTimeout(this.progressTimer);
    for (const p of this.probes) void p.cancel();
    void this.current?.cancel();
    for (const d of this.disposables) d.dispose();
  }
}

/** One inference result in the benchmark log: both throughputs, peak memory, the accuracy cost when measured. */
function inferenceLogLine(f: InferenceFigures, peak: number | undefined): string {
  const acc = f.nextTokenAgreement !== undefined
    ? `, logits max |Δ| ${formatNumber(f.maxAbsLogitDiff, 3)} mean ${formatNumber(f.meanAbsLogitDiff, 3)}, next-token agreement ${formatNumber(f.nextTokenAgreement * 100, 1)} %`
    : '';
  return `prefill ${formatNumber(f.prefillTokensPerS, 0)} tokens/s, decode ${formatNumber(f.decodeTokensPerS, 0)} tokens/s, peak ${formatBytes(peak)}${acc}${f.referenceOnly ? ' (accuracy reference only)' : ''}`;
}

function quoteArg(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** The state with what the view may offer recomputed from it (backends, whether Run can start). */
function withAvailability(state: BenchmarkViewState): BenchmarkViewState {
  const backends = backendChoices(state.environment);
  const runBlocked = runBlockedReason({ ...state, backends });
  return { ...state, backends, inferenceBackends: inferenceBackendChoices(state.environment), runBlocked, abBlocked: abBlockedReason(runBlocked, state.workspaceFolder) };
}
