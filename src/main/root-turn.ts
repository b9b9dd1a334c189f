import type { AgentEvent } from '../shared/events.js';
import type { FailureCode } from '../shared/failure.js';
import type { Gate } from '../shared/governor/types.js';
import { type LoopResume, type LoopSink, runAgentLoop } from '../shared/loop/agent-loop.js';
import { eventSink } from '../shared/loop/event-sink.js';
import type { CacheSettings } from '../shared/provider/cache.js';
import type { Provider } from '../shared/provider/provider.js';
import type { MessageParam } from '../shared/provider/types.js';
import { redactSecrets } from '../shared/redact.js';
import type { AgentUsage } from '../shared/result.js';
import type { AnyTool } from '../shared/tools/types.js';
import type { TraceSink } from '../shared/trace/types.js';
import { ROOT_ID } from './root-journal.js';

export { ROOT_ID };

/** How one root turn ended. */
export interface TurnResult {
  outcome: 'ready' | 'cancelled' | 'capped' | 'failed';
  /** The root's final text, when ready. */
  text: string;
  /** The cancel reason, or what failed, for people. */
  reason?: string;
  /** Set exactly when `outcome` is `failed`: what failed, as a stable code. */
  code?: FailureCode;
  usage: AgentUsage;
  generation: number;
}

export interface RootTurnInput {
  maxDepth: number;
  system: string;
  /** The root's transcript; the turn appends to it. */
  messages: MessageParam[];
  tools: ReadonlyMap<string, AnyTool>;
  provider: Provider;
  gate?: Gate | undefined;
  /** The root's patience with refused requests, in ms; unset, the gate's. */
  patienceMs?: number | undefined;
  /** Prompt-cache breakpoints on the root's requests (the engine's settings). */
  cache?: CacheSettings | undefined;
  maxSteps: number;
  signal: AbortSignal;
  workspace: string | undefined;
  usage: AgentUsage;
  generation: number;
  emit(event: AgentEvent): void;
  /** Where the turn's provider attempts' and tool calls' spans go, when the engine traces. */
  trace?: TraceSink | undefined;
  /** The time limit of a tool call whose tool sets none (the engine's `toolTimeoutMs`). */
  toolTimeoutMs?: number | undefined;
  /** Where the transcript's committed messages go (the run journal). */
  commit?: (messages: MessageParam[]) => void;
  /** A resumed run's turn: the last step's calls, committed and not answered, run again first. */
  resumeFrom?: LoopResume | undefined;
}

/** Runs the root's steps (the one agent loop, at depth 0) until it is ready for the user. */
export async function runRootTurn(input: RootTurnInput): Promise<TurnResult> {
  const { usage, generation } = input;
  try {
    const outcome = await runAgentLoop({
      agentId: ROOT_ID,
      depth: 0,
      maxDepth: input.maxDepth,
      system: input.system,
      messages: input.messages,
      tools: input.tools,
      provider: input.provider,
      gate: input.gate,
      patienceMs: input.patienceMs,
      cache: input.cache,
      maxSteps: input.maxSteps,
      signal: input.signal,
      workspace: input.workspace,
      usage,
      sink: rootSink(input.emit, input.commit),
      trace: input.trace,
      toolTimeoutMs: input.toolTimeoutMs,
      ...(input.resumeFrom ? { resumeFrom: input.resumeFrom } : {}),
    });
    switch (outcome.kind) {
      case 'ready':
        return { outcome: 'ready', text: redactSecrets(outcome.text), usage, generation };
      case 'cancelled':
        return { outcome: 'cancelled', text: '', reason: outcome.reason, usage, generation };
      case 'capped':
        return { outcome: 'capped', text: '', usage, generation };
      case 'failed': {
        const { code, message } = outcome.failure;
        return { outcome: 'failed', text: '', reason: message, code, usage, generation };
      }
      default:
        // The root is never advertised `reply` and never nudged; these cannot end a root turn.
        return internal(`a root turn ended ${outcome.kind}`, usage, generation);
    }
  } catch (error) {
    return internal(error instanceof Error ? error.message : String(error), usage, generation);
  }
}

function internal(message: string, usage: AgentUsage, generation: number): TurnResult {
  return {
    outcome: 'failed',
    text: '',
    reason: redactSecrets(message),
    code: 'internal',
    usage,
    generation,
  };
}

/** The root's loop reports as session events. */
function rootSink(
  emit: (event: AgentEvent) => void,
  commit: ((messages: MessageParam[]) => void) | undefined,
): LoopSink {
  return { commit: commit ?? (() => {}), ...eventSink(ROOT_ID, emit) };
}
