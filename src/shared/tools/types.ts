import type { TraceSpanId } from '../trace/types.js';

/** A JSON Schema for a tool's input; its top level is an object schema. */
export interface InputSchema {
  type: 'object';
  properties?: Record<string, unknown>;
  required?: string[];
  [keyword: string]: unknown;
}

/** What a tool's `run` receives beside its input. */
export interface ToolContext {
  /**
   * Aborted when the agent is cancelled (its reason: the cancel reason), when this call runs past
   * its time limit (a `TimeoutError` naming the tool and the limit), or when the agent's time
   * budget runs out while it runs. A tool that waits must observe it: the call is answered at
   * once either way, and what the tool does after that is dropped.
   */
  signal: AbortSignal;
  agentId: string;
  /** 0 for the root, 1 for its children, … */
  depth: number;
  /** The read-only workspace root, when the agent has one. */
  workspace?: string | undefined;
  /**
   * What the caller gave the agent's spawn as `context` (or its group, or the agent that spawned
   * it): the request, tenant or user the agent works for. A host tool gets the value itself; a
   * tool that runs in a worker gets a structured clone of it. Unset when none was given.
   */
  context?: unknown;
  /** This call's `execute_tool` span, when the agent is traced: a spawn hangs its child under it. */
  span?: TraceSpanId;
  /**
   * The tool_use id of this call. A spawn is keyed by it: the same call run again (a parent
   * resumed after its worker died) finds the child it started instead of starting another.
   */
  callId?: string;
}

/**
 * A tool an agent can call. Tool modules export these (see docs/TOOLS.md).
 * `run` returns any value; it is rendered to text by the one render rule. A throw becomes an
 * `is_error` tool result the model sees, and the agent goes on.
 */
export interface ToolDefinition<Input = Record<string, unknown>> {
  name: string;
  description: string;
  inputSchema: InputSchema;
  /**
   * May run beside the other calls of its batch instead of in turn (sync `agent` calls do, so a
   * batch of them overlaps). Results still come back in call order.
   */
  parallel?: boolean;
  /**
   * How long one call may run, in whole ms (1 to 2³¹−1): past it the call's `signal` aborts and the
   * model gets an `is_error` result naming the tool and the limit, and the agent goes on.
   * Default: the engine's `toolTimeoutMs` (10 minutes). A tool that runs in a worker thread and
   * blocks it past this limit and the engine's `toolGraceMs` has its thread terminated
   * (docs/TOOLS.md, "Time limits").
   */
  timeoutMs?: number;
  run(input: Input, context: ToolContext): unknown;
}

// biome-ignore lint/suspicious/noExplicitAny: a registry holds tools of every input type.
export type AnyTool = ToolDefinition<any>;

/** The tools an agent may only get by its place in the tree. */
export const SPAWN_TOOLS: readonly string[] = ['agent', 'agents', 'agent_cancel'];
export const REPLY_TOOL = 'reply';
