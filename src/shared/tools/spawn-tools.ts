import type { AgentSummary } from '../child-spec.js';
import { UNTIMED } from './tool-timeout.js';
import type { AnyTool, InputSchema, ToolContext } from './types.js';

/** Input of the `agent` tool (README, "The contracts"). */
export interface AgentToolInput {
  title: string;
  prompt: string;
  mode?: 'sync' | 'async';
  system?: string;
  tools?: string[];
  /** A named agent (an agent file): its fields are the defaults of this spawn. */
  agent?: string;
  /** A JSON Schema the child's reply must match; its result then carries `value`. */
  outputSchema?: Record<string, unknown>;
}

/** The receipt an async spawn answers with at once. */
export interface AgentReceipt {
  id: string;
  title: string;
  status: 'started';
  logDir: string;
}

/** One live async agent as `agents` lists it. */
export interface AgentInfo {
  id: string;
  title: string;
  status: 'queued' | 'running';
  logDir: string;
  elapsedMs: number;
}

/** What the spawn family needs from its owner (the session, or the host bridge for a child). */
export interface AgentSpawner {
  /** Runs a child to its end; resolves with the text the parent sees. */
  runSync(input: AgentToolInput, context: ToolContext): Promise<string>;
  spawnAsync(input: AgentToolInput, context: ToolContext): AgentReceipt | Promise<AgentReceipt>;
  list(context: ToolContext): AgentInfo[] | Promise<AgentInfo[]>;
  cancel(
    id: string,
    context: ToolContext,
  ): { id: string; wasLive: boolean } | Promise<{ id: string; wasLive: boolean }>;
}

export const AGENT_TOOL_SCHEMA: InputSchema = {
  type: 'object',
  properties: {
    title: { type: 'string', minLength: 1, maxLength: 200 },
    prompt: { type: 'string', minLength: 1 },
    mode: { enum: ['sync', 'async'] },
    system: { type: 'string' },
    tools: { type: 'array', items: { type: 'string' } },
    outputSchema: { type: 'object' },
  },
  required: ['title', 'prompt'],
  additionalProperties: false,
};

const AGENT_TOOL_DESCRIPTION =
  'Start a sub-agent on a task. mode "sync" (default) waits and returns its result here; ' +
  'mode "async" returns a receipt at once, and the result arrives later as a message. ' +
  'The sub-agent sees only `prompt` (and `system`): give it everything it needs. ' +
  '`outputSchema` (a JSON Schema) makes it reply with JSON matching it.';

/**
 * The `agent` tool's schema and description for an agent that may pick among named agents:
 * `agent` takes one of their names, and the description lists each with what it is for.
 */
export function agentToolShape(agents: readonly AgentSummary[] = []): {
  description: string;
  inputSchema: InputSchema;
} {
  if (agents.length === 0) {
    return { description: AGENT_TOOL_DESCRIPTION, inputSchema: AGENT_TOOL_SCHEMA };
  }
  const listed = agents.map((agent) => `- ${agent.name}: ${agent.description}`).join('\n');
  return {
    description: `${AGENT_TOOL_DESCRIPTION} \`agent\` names a predefined agent, which brings its own instructions, tools and limits:\n${listed}`,
    inputSchema: {
      ...AGENT_TOOL_SCHEMA,
      properties: {
        ...AGENT_TOOL_SCHEMA.properties,
        agent: { enum: agents.map((agent) => agent.name) },
      },
    },
  };
}

/** The spawn family bound to one spawner; `agents` are the named agents it may start. */
export function spawnTools(spawner: AgentSpawner, agents?: readonly AgentSummary[]): AnyTool[] {
  return [
    {
      name: 'agent',
      ...agentToolShape(agents),
      // Sync children of one batch run concurrently and join before the next request.
      parallel: true,
      // A sync call lasts as long as its child, which has limits of its own (`timeout`, budget).
      timeoutMs: UNTIMED,
      run: async (input: AgentToolInput, context: ToolContext) =>
        input.mode === 'async'
          ? JSON.stringify(await spawner.spawnAsync(input, context))
          : spawner.runSync(input, context),
    },
    {
      name: 'agents',
      description: 'List the live background (async) agents: id, title, status, logDir, elapsedMs.',
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      timeoutMs: UNTIMED,
      run: (_input: unknown, context: ToolContext) => spawner.list(context),
    },
    {
      name: 'agent_cancel',
      description:
        'Cancel one background agent by id. Says whether it was live; its cancelled result is ' +
        'delivered like any other.',
      inputSchema: {
        type: 'object',
        properties: { id: { type: 'string', minLength: 1 } },
        required: ['id'],
        additionalProperties: false,
      },
      timeoutMs: UNTIMED,
      run: (input: { id: string }, context: ToolContext) => spawner.cancel(input.id, context),
    },
  ];
}
