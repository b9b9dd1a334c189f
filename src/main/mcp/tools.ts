import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { UsageError } from '../../shared/errors.js';
import { redactSecrets } from '../../shared/redact.js';
import { redactBlocks, ToolContent } from '../../shared/tools/content.js';
import { schemaValidator } from '../../shared/tools/dispatch.js';
import type { AnyTool, InputSchema } from '../../shared/tools/types.js';
import { type McpConnection, ServerDownError } from './connection.js';
import { toolValue } from './result.js';

/** What a provider takes as a tool's name. */
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,128}$/;

/** The name an agent calls a server's tool by. */
export function mcpToolName(server: string, tool: string): string {
  return `mcp__${server}__${tool}`;
}

/**
 * A server's tools as host tools: each named `mcp__NAME__TOOL`, advertised with the server's
 * description and input schema, and run on main over the server's one connection. A child in any
 * worker reaches them through its host bridge, as any host tool. `where` names the server's
 * entry in messages.
 */
export function mcpTools(
  connection: McpConnection,
  listed: readonly Tool[],
  where: string,
  /** Each call's time limit (the entry's `toolTimeoutMs`); unset, the engine's. */
  timeoutMs?: number,
): AnyTool[] {
  return listed.map((tool) => {
    const name = mcpToolName(connection.name, tool.name);
    if (!TOOL_NAME.test(name)) {
      throw new UsageError(
        `Expected each tool of MCP server ${where} to have a name that makes \`mcp__NAME__TOOL\` 1-128 of [a-zA-Z0-9_-], got \`${tool.name}\``,
      );
    }
    return {
      name,
      description: tool.description ?? tool.title ?? `${tool.name} (MCP server ${connection.name})`,
      inputSchema: checkedSchema(tool.inputSchema as InputSchema),
      // Calls of one batch overlap: the server takes them side by side, up to its cap.
      parallel: true,
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
      async run(input: Record<string, unknown>, context) {
        let result: Awaited<ReturnType<McpConnection['call']>>;
        try {
          result = await connection.call(tool.name, input, context.signal);
        } catch (error) {
          if (context.signal.aborted) throw context.signal.reason;
          if (error instanceof ServerDownError) throw error;
          // The SDK's message repeats its `MCP error -32602: ` prefix; once is enough.
          const message = (error as Error).message.replace(/(MCP error -?\d+: )\1+/, '$1');
          throw new Error(
            redactSecrets(`the call to MCP server \`${connection.name}\` failed: ${message}`),
          );
        }
        const value = toolValue(result);
        // The server's own words may hold what it was started with: secrets are taken out here,
        // on main, where they are registered.
        return value instanceof ToolContent
          ? new ToolContent(redactBlocks(value.blocks, redactSecrets))
          : redactSecrets(value);
      },
    } satisfies AnyTool;
  });
}

/**
 * The schema agents' calls are checked against before they reach the server. One Ajv cannot
 * compile (a draft it does not know) is checked without its `$schema`, and failing that, or one
 * that is not an object schema, is not checked here: the server checks its own input.
 */
function checkedSchema(schema: InputSchema): InputSchema {
  // A provider takes only an object schema: anything else is sent as any object.
  if (typeof schema !== 'object' || schema === null || schema.type !== 'object') {
    return { type: 'object' };
  }
  for (const candidate of [schema, withoutDraft(schema)]) {
    try {
      schemaValidator(candidate);
      return candidate;
    } catch {}
  }
  return { type: 'object' };
}

function withoutDraft(schema: InputSchema): InputSchema {
  const { $schema: _draft, ...rest } = schema;
  return rest as InputSchema;
}
