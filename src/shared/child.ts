import type { BudgetGuard } from './budget.js';
import { type ChildSpec, MAX_BAD_REPLIES } from './child-spec.js';
import type { AgentEvent } from './events.js';
import { internalFailure } from './failure.js';
import type { Gate } from './governor/types.js';
import { AgentJournal } from './journal/agent-journal.js';
import { keepsLog } from './journal/policy.js';
import { transcriptText } from './journal/reader.js';
import { historyFrom } from './journal/resume-history.js';
import {
  type ChildInbox,
  type LoopOutcome,
  type LoopSink,
  runAgentLoop,
} from './loop/agent-loop.js';
import { eventSink } from './loop/event-sink.js';
import { firstMessage } from './loop/step-request.js';
import { defined } from './option-schema.js';
import { priceOf, priceTable } from './prices.js';
import type { MessageParam, ModelClient, ToolCall } from './provider/types.js';
import { redactEvent, redactSecrets, redactValue } from './redact.js';
import { clip, renderValue } from './render.js';
import { restoreTranscript } from './restore.js';
import { type AgentResult, type AgentUsage, emptyUsage } from './result.js';
import { loadToolModule } from './tools/modules.js';
import { DELIVERY_DISCIPLINE } from './tools/reply.js';
import { selectionPicks } from './tools/selection.js';
import type { AnyTool } from './tools/types.js';
import { WORKSPACE_TOOLS } from './tools/workspace.js';
import type { TraceSink } from './trace/types.js';

export interface ChildRunDeps {
  provider: ModelClient;
  /** The rate-limit governor every provider attempt asks first, when there is one. */
  gate?: Gate | undefined;
  signal: AbortSignal;
  emit: (event: AgentEvent) => void;
  /** Tools supplied by the host side (host tools, the spawn family when depth allows). */
  extraTools?: readonly AnyTool[];
  /** Results of this child's own async agents. */
  inbox?: ChildInbox;
  /** A tool that runs in this worker entered or left its `run`: crash forensics rests on it. */
  onLocalTool?: (phase: 'enter' | 'exit', call: ToolCall, limitMs?: number) => void;
  /** The child's budget (its own limits, and a tree budget's word from main). */
  budget?: BudgetGuard | undefined;
  /** Where its provider attempts' and tool calls' spans go, when it is traced. */
  trace?: TraceSink | undefined;
  /**
   * Called with every transcript write as it is queued, in the same bytes as on disk: the lines
   * appended, or with `replace` the whole new transcript (a resume). A copy of the transcript
   * kept elsewhere from these can resume the child on another machine.
   */
  checkpoint?: ((write: { replace: boolean; lines: string }) => void) | undefined;
  /** The spawn's `context` for its tools (`ToolContext.context`); never journaled. */
  context?: unknown;
}

/** The tools a child may have, before its spec's `tools` selection. */
export async function childTools(
  spec: ChildSpec,
  extra: readonly AnyTool[] = [],
): Promise<Map<string, AnyTool>> {
  const all: AnyTool[] = [];
  if (spec.workspace) all.push(...WORKSPACE_TOOLS);
  for (const modulePath of spec.toolModules) all.push(...(await loadToolModule(modulePath)));
  all.push(...extra);
  const tools = new Map<string, AnyTool>();
  for (const tool of all) tools.set(tool.name, tool);
  if (spec.tools) {
    for (const name of [...tools.keys()]) {
      if (!selectionPicks(spec.tools, name)) tools.delete(name);
    }
  }
  return tools;
}

export function childSystemPrompt(system: string | undefined): string {
  return system && system.trim() !== ''
    ? `${system}\n\n${DELIVERY_DISCIPLINE}`
    : DELIVERY_DISCIPLINE;
}

/**
 * Runs one child agent to its single AgentResult. Never throws: whatever happens inside becomes
 * a `failed` result. The reply payload is held here, in child-owned state, and spilled whole to
 * the log before the result settles (unless the `logs` policy drops the folder).
 */
export async function runChild(spec: ChildSpec, deps: ChildRunDeps): Promise<AgentResult> {
  const run: ChildRun = {
    spec,
    log: new AgentJournal(spec.logDir, spec.id, spec.inc ?? 0),
    usage: emptyUsage(),
    started: performance.now(),
  };
  let result: AgentResult;
  try {
    result = await runLoop(run, deps);
  } catch (error) {
    const { message } = internalFailure(error);
    result = settle(run, {
      kind: 'failed',
      failure: { code: 'internal', message: redactSecrets(message) },
    });
  }
  // The result's record and the reply file are written before the result is posted, so a
  // `replyFile` can be read at once. Records the `logs` policy does not keep go at close.
  return run.log.finish(result, keepsLog(spec.logs, result.outcome));
}

/** One child's run: what its result is made from. */
interface ChildRun {
  spec: ChildSpec;
  log: AgentJournal;
  usage: AgentUsage;
  started: number;
}

async function runLoop(run: ChildRun, deps: ChildRunDeps): Promise<AgentResult> {
  const { spec, log, usage } = run;
  const tools = await childTools(spec, deps.extraTools);
  const restored = spec.resume ? restoreTranscript(await resumedText(spec)) : undefined;
  if (restored) {
    usage.steps = restored.steps;
    if (restored.ended) return settle(run, restored.ended);
    deps.budget?.resumeSteps?.(restored.steps);
  }
  // A step a Message Batch answered costs half of each token price: the loop prices it so
  // (docs/LANES.md), whichever lane the agent is in.
  const price = priceOf(spec.provider.model, priceTable(spec.prices));
  const messages: MessageParam[] = restored?.messages ?? [firstMessage(spec.prompt, spec.preamble)];
  // Its run's start record holds the whole transcript it goes on from: a resumed child's
  // supersedes what its dead worker wrote, including a write of that worker that lands late.
  log.start(
    {
      id: spec.id,
      title: spec.title,
      depth: spec.depth,
      generation: spec.generation,
      model: spec.provider.model,
      baseURL: spec.provider.baseURL ?? null,
      maxSteps: spec.maxSteps,
      tools: [...tools.keys()],
      ...defined({
        agent: spec.agentName,
        budget: spec.budget,
        outputSchema: spec.outputSchema,
        key: spec.key,
        parent: spec.parent,
        call: spec.call,
        mode: spec.mode,
        system: spec.system,
        select: spec.tools,
      }),
      ...(restored ? { resumedAtStep: restored.steps } : {}),
    },
    messages,
  );
  checkpoint(deps, messages, spec.resume !== undefined);
  // Tools from the host side run on main: only the others can take this worker down.
  const remote = new Set((deps.extraTools ?? []).map((tool) => tool.name));
  const outcome = await runAgentLoop({
    agentId: spec.id,
    depth: spec.depth,
    maxDepth: spec.maxDepth,
    system: childSystemPrompt(spec.system),
    messages,
    tools,
    provider: deps.provider,
    gate: deps.gate,
    patienceMs: spec.patienceMs,
    model: spec.provider.model,
    cache: spec.cache,
    maxSteps: spec.maxSteps,
    signal: deps.signal,
    workspace: spec.workspace,
    usage,
    ...(restored ? { nudged: restored.nudged, resumeFrom: restored } : {}),
    ...(deps.inbox ? { inbox: deps.inbox } : {}),
    outputSchema: spec.outputSchema,
    maxBadReplies: MAX_BAD_REPLIES,
    budget: deps.budget,
    price,
    trace: deps.trace,
    toolTimeoutMs: spec.toolTimeoutMs,
    ...(deps.context === undefined ? {} : { context: deps.context }),
    sink: childSink(spec, log, deps, remote),
  });
  return settle(run, outcome);
}

/**
 * The transcript lines a resumed child goes on from: its queue job's checkpoint, or its records in
 * the journal segments of the threads it ran on ('' when none holds a start of it: it starts over).
 */
async function resumedText(spec: ChildSpec): Promise<string> {
  const from = spec.resume;
  if (!from) return '';
  if ('lines' in from) return from.lines;
  const history = await historyFrom(from.segments, spec.id);
  return history ? transcriptText(history.messages) : '';
}

/** Copies committed messages to the checkpoint, when there is one (queue mode). */
function checkpoint(deps: ChildRunDeps, messages: readonly MessageParam[], replace: boolean): void {
  // An empty append writes nothing, so there is nothing to copy either.
  if (!deps.checkpoint || (!replace && messages.length === 0)) return;
  // One redacted JSON line per message (a JSON string holds no raw newline to split a key).
  deps.checkpoint({ replace, lines: redactSecrets(transcriptText(messages)) });
}

/** Where a child's loop reports: its log, its events (none without a listener but text). */
function childSink(
  spec: ChildSpec,
  log: AgentJournal,
  deps: ChildRunDeps,
  remote: ReadonlySet<string>,
): LoopSink {
  const wanted = spec.eventTypes ? new Set(spec.eventTypes) : undefined;
  const events = eventSink(spec.id, (event) => {
    if (!wanted || wanted.has(event.type)) deps.emit(redactEvent(event));
  });
  const onLocalTool = deps.onLocalTool;
  const { textDelta, ...rest } = events;
  return {
    commit: (added) => {
      log.step(added);
      checkpoint(deps, added, false);
    },
    ...(spec.streamText ? { textDelta } : {}),
    ...(spec.liveEvents !== false ? rest : {}),
    ...(onLocalTool
      ? {
          toolEnter: (call: ToolCall, limitMs: number) => {
            if (!remote.has(call.name)) onLocalTool('enter', call, limitMs);
          },
          toolExit: (call: ToolCall) => {
            if (!remote.has(call.name)) onLocalTool('exit', call);
          },
        }
      : {}),
  };
}

/** The child's one AgentResult, from how its loop ended. */
function settle(run: ChildRun, outcome: LoopOutcome): AgentResult {
  const { spec } = run;
  const common = {
    id: spec.id,
    title: spec.title,
    logDir: spec.logDir,
    generation: spec.generation,
    truncated: false,
    usage: run.usage,
    text: '',
    elapsedMs: Math.round(performance.now() - run.started),
    ...(spec.lane === 'batches' ? { lane: spec.lane } : {}),
  };
  switch (outcome.kind) {
    case 'replied': {
      const over = defined({ budgetExceeded: outcome.budgetExceeded });
      // A typed reply is one value, parsed and checked; it may render as nothing (`null`).
      const typed = spec.outputSchema ? { value: redactValue(outcome.replies[0]) } : {};
      const rendered = outcome.replies.map(renderValue).filter((text) => text !== '');
      const full = rendered.join('\n\n');
      if (full === '') {
        return spec.outputSchema
          ? { ...common, outcome: 'complete', ...typed, ...over }
          : { ...common, outcome: 'empty', ...over };
      }
      const only = outcome.replies.length === 1 ? outcome.replies[0] : undefined;
      const structured = typeof only === 'object' && only !== null;
      const clipped = clip(full, spec.replyCap);
      // Only a reply longer than the cap spills, whole, to its own file; none when a complete
      // agent's records are not kept.
      const replyFile =
        clipped.truncated && keepsLog(spec.logs, 'complete')
          ? run.log.spillReply(full, structured)
          : undefined;
      return {
        ...common,
        outcome: 'complete',
        text: redactSecrets(clipped.text),
        truncated: clipped.truncated,
        ...defined({ replyFile }),
        ...typed,
        ...over,
      };
    }
    case 'empty':
      return outcome.budgetExceeded === undefined
        ? { ...common, outcome: 'empty' }
        : { ...common, outcome: 'empty', budgetExceeded: outcome.budgetExceeded };
    case 'ready':
      // A child never ends `ready` (the loop nudges it instead); kept total for the type.
      return { ...common, outcome: 'empty' };
    case 'capped':
      return { ...common, outcome: 'capped' };
    case 'cancelled':
      return { ...common, outcome: 'cancelled', reason: outcome.reason };
    case 'failed':
      return {
        ...common,
        outcome: 'failed',
        reason: redactSecrets(outcome.failure.message),
        code: outcome.failure.code,
        ...(outcome.failure.breakerOpen ? { breakerOpen: true } : {}),
      };
  }
}
