import os from 'node:os';
import { AgentFileError, AgentFolderError } from '../../main/agents/definition.js';
import type { Dashboard } from '../../main/dashboard/dashboard.js';
import type { DashboardCommand } from '../../main/dashboard/state.js';
import { checkEngine, Engine, type EngineOptions, startMcpServers } from '../../main/engine.js';
import type { EngineCheck } from '../../main/engine-check.js';
import { validateEngineOptions } from '../../main/engine-check.js';
import type { AgentFileCheck } from '../../main/engine-options.js';
import type { McpServers } from '../../main/mcp/servers.js';
import { UsageError } from '../../shared/errors.js';
import { defined } from '../../shared/option-schema.js';
import type { ScriptedModelOptions } from '../../testing/index.js';
import { type DashboardChoice, dashboardFlags, startDashboard } from '../dashboard-flags.js';
import { type ParsedValues, stringFlag } from '../flags.js';
import { journalNote } from '../logs/run-folders.js';
import { flagMessage } from '../option-flags.js';
import { note, shellQuote } from '../output.js';
import { onCleanup } from '../process.js';
import {
  chooseProvider,
  type ProviderChoice,
  type SelectedProvider,
  startProvider,
} from '../provider-select.js';
import { checkCliTracing, startCliTracing } from '../tracing/tracing.js';
import { engineOptionsFrom, noteWarning, OTEL_ENDPOINT_FLAG, TRACE_FILE_FLAG } from './common.js';

export interface StartedEngine {
  engine: Engine;
  provider: SelectedProvider;
  /** The live dashboard, when `--dashboard` asked for one. */
  dashboard: Dashboard | undefined;
}

/** The flags, checked and turned into what starting needs; nothing has started yet. */
export interface PreparedEngine {
  options: EngineOptions;
  choice: ProviderChoice;
  /** The engine's own check of an agent's options, for checking task lines up front. */
  check: EngineCheck;
  /** The MCP servers, started once for the check and handed to the engine (closed at exit). */
  mcp?: McpServers | undefined;
  /** Where `--dashboard` asks the dashboard to listen. */
  dashboard?: DashboardChoice | undefined;
}

/**
 * Checks every flag and the engine options they make, as the engine would, before anything
 * starts: the workspace, the tool modules (imported here, with a timeout), the base URL. Errors
 * name the flags (`--ceiling`), not the library's option names.
 */
export async function prepareEngine(
  values: ParsedValues,
  options: {
    workspace?: string | undefined;
    agentFileCheck?: AgentFileCheck;
    /** Engine options a command's own flags set (`batch --lane`). */
    own?: EngineOptions;
  } = {},
): Promise<PreparedEngine> {
  const engineOptions = {
    ...engineOptionsFrom(values, options),
    ...defined({ agentFileCheck: options.agentFileCheck }),
    ...options.own,
  };
  const choice = chooseProvider(values);
  checkCliTracing(tracingFlags(values));
  const dashboard = dashboardFlags(values);
  try {
    const checked = { ...engineOptions, provider: { ...engineOptions.provider, ...choice.config } };
    // Started once, here: the check lists their tools, and the engine then uses them.
    validateEngineOptions(checked);
    const mcp = await startMcpServers(checked);
    if (mcp) onCleanup(() => mcp.close());
    const check = await checkEngine(checked, {}, mcp);
    return { options: engineOptions, choice, check, mcp, dashboard };
  } catch (error) {
    // The way out of a bad agent file, in the CLI's words.
    if (error instanceof AgentFolderError) {
      throw new AgentFolderError(
        error.fileError,
        error.folder,
        `give --agents a folder without it (\`cohort agents check ${shellQuote(error.folder)}\` lists every bad file)`,
      );
    }
    // An agent file's message names the file's own fields, not flags.
    if (error instanceof UsageError && !(error instanceof AgentFileError)) {
      throw new UsageError(flagMessage(error.message));
    }
    throw error;
  }
}

/**
 * Starts what a command runs on, in the one order that loses nothing: everything is checked
 * first (`prepareEngine`), then the built-in model and the engine start, each registered for
 * cleanup at once so any later failure still closes them and the process exits. Once it has
 * started, one line on stderr says where the run's journal is.
 */
export async function startEngine(
  values: ParsedValues,
  options: {
    workspace?: string | undefined;
    mockLoad?: ScriptedModelOptions | undefined;
    prepared?: PreparedEngine | undefined;
    /** No line on stderr saying where the journal is (`batch --quiet`). */
    quiet?: boolean | undefined;
    /** What the dashboard's page names as the command (default `run`). */
    command?: DashboardCommand;
  } = {},
): Promise<StartedEngine> {
  const prepared = options.prepared ?? (await prepareEngine(values, options));
  warnAboutThreads(prepared.options.threads);
  // Registered before the engine, so it runs after the engine closed: every span is ended.
  const tracing = await startTracing(values);
  if (tracing) onCleanup(() => tracing.shutdown());
  const provider = await startProvider(prepared.choice, {
    notice: note,
    ...(options.mockLoad ? { mockLoad: options.mockLoad } : {}),
  });
  onCleanup(() => provider.close());
  if (prepared.options.queue && provider.kind === 'mock') {
    note(
      "cohort: note: with --queue, workers reach the built-in model at this machine's loopback address: only workers on this machine can. For a fleet, run `cohort mock --host 0.0.0.0 --port N` and pass --base-url",
    );
  }
  const engine = await Engine.start(
    {
      ...prepared.options,
      provider: { ...prepared.options.provider, ...provider.config },
      ...(tracing ? { tracerProvider: tracing.provider } : {}),
      onWarning: noteWarning,
    },
    { mcp: prepared.mcp },
  );
  onCleanup(() => engine.close());
  // On stderr, so stdout stays the command's output (`--json`).
  if (!options.quiet) note(journalNote(engine.logDir));
  const dashboard = prepared.dashboard
    ? await startDashboard(engine, prepared.dashboard, options.command ?? 'run')
    : undefined;
  return { engine, provider, dashboard };
}

/** The tracer provider `--otel-endpoint` and `--trace-file` ask for; none without them. */
async function startTracing(
  values: ParsedValues,
): Promise<Awaited<ReturnType<typeof startCliTracing>> | undefined> {
  const flags = tracingFlags(values);
  if (flags.endpoint === undefined && flags.file === undefined) return undefined;
  return startCliTracing(flags);
}

/** `--otel-endpoint` and `--trace-file`, as given. */
export function tracingFlags(values: ParsedValues): { endpoint?: string; file?: string } {
  const endpoint = stringFlag(values, OTEL_ENDPOINT_FLAG);
  const file = stringFlag(values, TRACE_FILE_FLAG);
  return defined({ endpoint, file });
}

/** More threads than cores only adds start-up time (each thread is a V8 isolate) and switching. */
function warnAboutThreads(threads: number | undefined): void {
  const cores = os.availableParallelism();
  if (threads !== undefined && threads > cores) {
    note(
      `cohort: warning: --threads ${threads} is more than this machine's ${cores} core(s); each thread takes time to start and adds no throughput`,
    );
  }
}
