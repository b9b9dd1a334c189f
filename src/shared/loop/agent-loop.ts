import type { BudgetGuard, BudgetKind, ModelPrice } from '../budget.js';
import { budgetNotice } from '../budget-meter.js';
import type { ProviderRetry } from '../events.js';
import type { Failure } from '../failure.js';
import type { Gate } from '../governor/types.js';
import { defined } from '../option-schema.js';
import type { CacheSettings } from '../provider/cache.js';
import {
  type ContentBlockParam,
  type MessageParam,
  type ModelClient,
  noUsage,
  type ProviderUsage,
  type ToolCall,
  type ToolResultBlock,
} from '../provider/types.js';
import { type AgentUsage, type CancelReason, cancelReasonOf, emptyUsage } from '../result.js';
import { type BatchOutcome, dispatchBatch, notRun } from '../tools/dispatch.js';
import { NUDGE_TEXT } from '../tools/reply.js';
import type { AnyTool } from '../tools/types.js';
import type { TraceSink } from '../trace/types.js';
import { advertised, lastTurnTools, request, spend } from './step-request.js';

/** How a run of steps ended. */
export type LoopOutcome =
  /** The root produced a message with no tool calls: it is ready for the user. */
  | { kind: 'ready'; text: string }
  /**
   * A child called `reply`; its values, in call order (one, when it has an output schema).
   * `budgetExceeded`: it replied in its last turn, after reaching that budget.
   */
  | { kind: 'replied'; replies: unknown[]; budgetExceeded?: BudgetKind }
  /** A child ended a step without a reply, after its one nudge, or after its last turn. */
  | { kind: 'empty'; budgetExceeded?: BudgetKind }
  | { kind: 'capped' }
  | { kind: 'cancelled'; reason: CancelReason }
  | { kind: 'failed'; failure: Failure };

/** Where the loop reports what happens; every method is optional but `commit`. */
export interface LoopSink {
  /**
   * New transcript messages, appended as they commit: a step's response before its tools run,
   * then the user message that answers them (or a step without calls with what follows it).
   */
  commit(messages: MessageParam[]): void | Promise<void>;
  stepStart?(step: number): void;
  textDelta?(text: string): void;
  toolCall?(call: ToolCall): void;
  toolResult?(call: ToolCall, result: ToolResultBlock): void;
  /**
   * A tool starts running (after its input checked out), with its time limit in ms (`Infinity`:
   * none); crash forensics and main's stuck-thread watchdog hang on this.
   */
  toolEnter?(call: ToolCall, limitMs: number): void;
  /** That tool returned or threw. */
  toolExit?(call: ToolCall): void;
  stepEnd?(step: number, usage: ProviderUsage): void;
  providerRetry?(info: ProviderRetry): void;
}

/**
 * The inbox of a child that spawned async agents of its own: their results are delivered at the
 * child's step boundaries, after the tool results of the step.
 */
export interface ChildInbox {
  /**
   * Pending results rendered as content blocks; removes them from the inbox. Resolves with none
   * when `signal` aborts first: a cancelled child never waits on its host.
   */
  take(signal: AbortSignal): Promise<ContentBlockParam[]>;
  /**
   * Waits until a result is pending; false at once when none of this child's agents is live, and
   * false when `signal` aborts.
   */
  waitForResult(signal: AbortSignal): Promise<boolean>;
}

export interface LoopOptions {
  agentId: string;
  /** 0 is the root; children are 1 and below. The terminal rule follows from it. */
  depth: number;
  maxDepth: number;
  system?: string | undefined;
  /** The transcript; the loop appends to it. It ends with a user message. */
  messages: MessageParam[];
  /** The tools advertised to this agent, `reply` excluded (the loop adds it for children). */
  tools: ReadonlyMap<string, AnyTool>;
  provider: ModelClient;
  /** The rate-limit governor every provider attempt asks first, when there is one. */
  gate?: Gate | undefined;
  /**
   * How long one of its requests may keep being refused (429/529) before it fails, in ms; unset,
   * the gate's patience.
   */
  patienceMs?: number | undefined;
  model?: string | undefined;
  /** Prompt-cache breakpoints on each request (provider/cache.ts); unset sends none. */
  cache?: CacheSettings | undefined;
  maxSteps: number;
  signal: AbortSignal;
  workspace?: string | undefined;
  sink: LoopSink;
  /** Usage to add to; the caller reads it after the run. */
  usage?: AgentUsage;
  /** Whether this child was already nudged (a resumed child keeps its latch). */
  nudged?: boolean;
  /** Results of this agent's own async agents, for children that may spawn. */
  inbox?: ChildInbox;
  /** For a resumed child: steps already taken, and how many of them count against maxSteps. */
  resumeFrom?: LoopResume;
  /**
   * A JSON Schema the reply's `result` must match (a typed reply). A reply that does not is
   * refused with the mismatch; after `maxBadReplies` refusals the child fails `bad_reply`.
   */
  outputSchema?: Record<string, unknown> | undefined;
  maxBadReplies?: number;
  /** The agent's budget: when it is reached, the agent gets one last turn with only `reply`. */
  budget?: BudgetGuard | undefined;
  /** The model's price, for `usage.costUsd`; unset when the model has none. */
  price?: ModelPrice | undefined;
  /** Where the provider attempts' and tool calls' spans go, when the agent is traced. */
  trace?: TraceSink | undefined;
  /** The time limit of a tool call whose tool sets none (docs/TOOLS.md); default ten minutes. */
  toolTimeoutMs?: number | undefined;
  /** The spawn's `context`, handed to every tool it calls (`ToolContext.context`). */
  context?: unknown;
}

/** Where a resumed child's loop stands, read back from its transcript. */
export interface LoopResume {
  steps: number;
  counted: number;
  nextStepFree: boolean;
  /** Replies refused for not matching the output schema so far. */
  badReplies?: number;
  /** The budget notice was committed: the next step is the last turn. */
  finalTurn?: BudgetKind;
  /** The last step's committed response, whose tool calls are to run (again). */
  pending?: ToolCall[];
}

/** What carries from step to step. */
interface LoopState {
  /** Whether this child has had its one nudge. */
  nudged: boolean;
  /** Steps counted against maxSteps. */
  counted: number;
  /** The next step is free: the one right after the nudge (README, "The contracts"), or the last turn. */
  freeStep: boolean;
  /** Replies refused for not matching the output schema. */
  badReplies: number;
  /** A budget was reached and its notice committed: this step is the last, with only `reply`. */
  finalTurn: BudgetKind | undefined;
}

/** A step's end: the loop goes on, or ends with an outcome. */
type StepEnd = { next: true } | { next: false; outcome: LoopOutcome };
const NEXT: StepEnd = { next: true };

/**
 * The one agent loop: the root and every child run it, with different tool sets and terminal
 * rules. A step is one provider request plus the whole batch of its tool calls; every tool_use is
 * answered by exactly one tool_result in the next user message, whatever ends the step.
 */
export async function runAgentLoop(options: LoopOptions): Promise<LoopOutcome> {
  const { messages, signal, sink } = options;
  const usage = options.usage ?? emptyUsage();
  const toolParams = advertised(options);
  const resume = options.resumeFrom;
  const state: LoopState = {
    nudged: options.nudged ?? false,
    counted: resume?.counted ?? 0,
    freeStep: (resume?.nextStepFree ?? false) || resume?.finalTurn !== undefined,
    badReplies: resume?.badReplies ?? 0,
    finalTurn: resume?.finalTurn,
  };
  // A resumed child whose last committed batch was its final refusal failed already.
  const badLimit = options.maxBadReplies ?? Number.POSITIVE_INFINITY;
  if (options.outputSchema && state.badReplies >= badLimit) {
    const message = `${state.badReplies} replies did not match the output schema (read back from its transcript)`;
    return { kind: 'failed', failure: { code: 'bad_reply', message } };
  }
  if (resume?.pending) {
    // Its response is in the transcript already: its tools run again, its request does not,
    // and a spawn among them finds the child it started before.
    state.freeStep = false;
    const end = await runBatch(options, state, resume.pending, true);
    sink.stepEnd?.(resume.steps, noUsage());
    if (!end.next) return end.outcome;
  }
  for (let step = (options.resumeFrom?.steps ?? 0) + 1; ; step++) {
    if (signal.aborted) return { kind: 'cancelled', reason: cancelReasonOf(signal) };
    if (!state.freeStep && state.counted >= options.maxSteps) return { kind: 'capped' };
    if (!state.freeStep) state.counted++;
    state.freeStep = false;
    sink.stepStart?.(step);
    const offered = state.finalTurn === undefined ? toolParams : lastTurnTools(options);
    const response = await request(options, offered, step);
    usage.providerCalls += response.calls;
    usage.steps++;
    spend(
      options,
      usage,
      response.ok ? response.turn.usage : response.usage,
      response.batched === true,
    );
    if (!response.ok) {
      if (response.error.code === 'aborted' || signal.aborted) {
        return { kind: 'cancelled', reason: cancelReasonOf(signal) };
      }
      const { code, message, breakerOpen } = response.error;
      const failure: Failure = { code, message: `provider ${code}: ${message}` };
      if (breakerOpen) failure.breakerOpen = true;
      return { kind: 'failed', failure };
    }
    const turn = response.turn;
    messages.push(turn.message);
    const end =
      turn.calls.length === 0
        ? await endWithoutCalls(options, state, turn.text)
        : await runBatch(options, state, turn.calls, false);
    sink.stepEnd?.(step, turn.usage);
    if (!end.next) return end.outcome;
  }
}

/**
 * A step whose message has no tool calls. The root is ready. A child waiting on its own async
 * agents is woken by their results; otherwise it gets its one nudge, and then ends `empty`.
 */
async function endWithoutCalls(
  options: LoopOptions,
  state: LoopState,
  text: string,
): Promise<StepEnd> {
  const { messages, signal, sink, inbox } = options;
  if (options.depth === 0) {
    await commit(sink, messages, 1);
    return { next: false, outcome: { kind: 'ready', text } };
  }
  // The last turn ended without a reply: the budget leaves no nudge.
  if (state.finalTurn !== undefined) {
    await commit(sink, messages, 1);
    return { next: false, outcome: { kind: 'empty', budgetExceeded: state.finalTurn } };
  }
  if (await noticeIfSpent(options, state)) return NEXT;
  // A budget reached while it waits (its time, or its tree's word) stops the wait too.
  const spent = options.budget?.spentSignal?.();
  if (inbox && (await inbox.waitForResult(spent ? AbortSignal.any([signal, spent]) : signal))) {
    const delivered: ContentBlockParam[] = await inbox.take(signal);
    if (delivered.length > 0) {
      const reached = options.budget?.exceeded();
      if (reached !== undefined) {
        delivered.push({ type: 'text', text: budgetNotice(reached) });
        startLastTurn(state, reached);
      }
      messages.push({ role: 'user', content: delivered });
      await commit(sink, messages, 2);
      return NEXT;
    }
  }
  // The wait ends `false` when the child is cancelled too: that is a cancel, never `empty`.
  if (signal.aborted) {
    await commit(sink, messages, 1);
    return { next: false, outcome: { kind: 'cancelled', reason: cancelReasonOf(signal) } };
  }
  if (await noticeIfSpent(options, state)) return NEXT;
  if (state.nudged) {
    await commit(sink, messages, 1);
    return { next: false, outcome: { kind: 'empty' } };
  }
  state.nudged = true;
  state.freeStep = true;
  messages.push({ role: 'user', content: NUDGE_TEXT });
  await commit(sink, messages, 2);
  return NEXT;
}

/**
 * Dispatches a step's tool calls and answers every one; a reply ends a child after the batch.
 * The response is committed before its tools run (unless `committed`: a resumed step's is), so a
 * worker that dies mid-batch costs the tools again, never the request: a model asked again would
 * answer with other calls, and the children this one started would be started twice.
 */
async function runBatch(
  options: LoopOptions,
  state: LoopState,
  calls: ToolCall[],
  committed: boolean,
): Promise<StepEnd> {
  const { messages, signal, sink, inbox } = options;
  if (!committed) await commit(sink, messages, 1);
  for (const call of calls) sink.toolCall?.(call);
  const batch = await dispatchBatch(calls, {
    // The last turn runs nothing but `reply`: any other call is answered as unknown.
    tools: state.finalTurn === undefined ? options.tools : new Map(),
    outputSchema: options.outputSchema,
    trace: options.trace,
    toolTimeoutMs: options.toolTimeoutMs,
    // The time budget holds inside a step too: a tool still running when it runs out is stopped.
    budgetSignal: options.budget?.spentSignal?.(),
    rules: { depth: options.depth, maxDepth: options.maxDepth },
    context: {
      signal,
      agentId: options.agentId,
      depth: options.depth,
      workspace: options.workspace,
      ...(options.context === undefined ? {} : { context: options.context }),
    },
    ...(sink.toolResult ? { onToolResult: sink.toolResult } : {}),
    ...(sink.toolEnter ? { onToolEnter: sink.toolEnter } : {}),
    ...(sink.toolExit ? { onToolExit: sink.toolExit } : {}),
  });
  const results: ContentBlockParam[] = answerAll(calls, batch.results);
  // A cancelled child takes no more results in: its step commits with what it has.
  if (inbox && !signal.aborted) results.push(...(await inbox.take(signal)));
  const end = afterBatch(options, state, batch);
  // A budget reached: its notice goes with this step's results, so the next step is the last.
  if (end === NEXT && !signal.aborted) {
    const over = options.budget?.exceeded();
    if (over !== undefined) {
      results.push({ type: 'text', text: budgetNotice(over) });
      startLastTurn(state, over);
    }
  }
  messages.push({ role: 'user', content: results });
  await commit(sink, messages, 1);
  if (end === NEXT && signal.aborted) {
    return { next: false, outcome: { kind: 'cancelled', reason: cancelReasonOf(signal) } };
  }
  return end;
}

/**
 * How a child's step ends once its batch is answered. A reply ends it (hard termination: the
 * whole batch has run); a last turn without one ends it `empty`; too many refused typed replies
 * fail it.
 */
function afterBatch(options: LoopOptions, state: LoopState, batch: BatchOutcome): StepEnd {
  if (options.depth < 1) return NEXT;
  const budgetExceeded = state.finalTurn;
  const over = defined({ budgetExceeded });
  if (batch.replies.length > 0) {
    return { next: false, outcome: { kind: 'replied', replies: batch.replies, ...over } };
  }
  if (budgetExceeded !== undefined) return { next: false, outcome: { kind: 'empty', ...over } };
  state.badReplies += batch.badReplies.length;
  const limit = options.maxBadReplies ?? Number.POSITIVE_INFINITY;
  const last = batch.badReplies.at(-1);
  if (last !== undefined && state.badReplies >= limit) {
    const message = `${state.badReplies} replies did not match the output schema; the last: ${last}`;
    return { next: false, outcome: { kind: 'failed', failure: { code: 'bad_reply', message } } };
  }
  return NEXT;
}

/**
 * After a step with no tool calls: when a budget is reached, its notice is the next user
 * message and the next step is the last. True when it was.
 */
async function noticeIfSpent(options: LoopOptions, state: LoopState): Promise<boolean> {
  const over = options.budget?.exceeded();
  if (over === undefined) return false;
  options.messages.push({ role: 'user', content: budgetNotice(over) });
  startLastTurn(state, over);
  await commit(options.sink, options.messages, 2);
  return true;
}

/** The budget's notice is committed: the next step is the last, free of `maxSteps`. */
function startLastTurn(state: LoopState, over: BudgetKind): void {
  state.finalTurn = over;
  state.freeStep = true;
}

/** Guarantees one result per call, in call order, even if a tool misbehaved. */
function answerAll(calls: readonly ToolCall[], results: ToolResultBlock[]): ToolResultBlock[] {
  const byId = new Map(results.map((result) => [result.tool_use_id, result]));
  return calls.map((call) => byId.get(call.id) ?? notRun(call, 'no result was produced'));
}

async function commit(sink: LoopSink, messages: MessageParam[], count: number): Promise<void> {
  await sink.commit(messages.slice(messages.length - count));
}
