import type { AnyTool, InputSchema, ToolContext } from './types.js';

/** Input of the `agent` tool (DESIGN §1.3). */
export interface AgentToolInput {
  title: string;
  prompt: string;
  mode?: 'sync' | 'async';
  system?: string;
  tools?: string[];
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
  },
  required: ['title', 'prompt'],
  additionalProperties: false,
};

/** The spawn family bound to one spawner. */
export function spawnTools(spawner: AgentSpawner): AnyTool[] {
  return [
    {
      name: 'agent',
      description:
        'Start a sub-agent on a task. mode "sync" (default) waits and returns its result here; ' +
        'mode "async" returns a receipt at once, and the result arrives later as a message. ' +
        'The sub-agent sees only `prompt` (and `system`): give it everything it needs.',
      inputSchema: AGENT_TOOL_SCHEMA,
      // Sync children of one batch run concurrently and join before the next request.
      parallel: true,
      run: async (input: AgentToolInput, context: ToolContext) =>
        input.mode === 'async'
          ? JSON.stringify(await spawner.spawnAsync(input, context))
          : spawner.runSync(input, context),
    },
    {
      name: 'agents',
      description: 'List the live background (async) agents: id, title, status, logDir, elapsedMs.',
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
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
      run: (input: { id: string }, context: ToolContext) => spawner.cancel(input.id, context),
    },
  ];
}
