import type { PlannedTurn } from './default-policy.js';
import { isRecord } from './is-record.js';
import type { RequestTool, ToolChoice } from './messages-api.js';
import type { ExpandedCall } from './script.js';

/**
 * The smallest input `schema` accepts, as far as its `required` list goes: each required
 * property gets a value of its own schema (see `minimalValue`), optional ones are left
 * out. A missing or non-object schema (a server tool has none) gives `{}`.
 */
export function minimalInput(schema: unknown): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  if (!isRecord(schema) || !Array.isArray(schema.required)) return input;
  const properties = isRecord(schema.properties) ? schema.properties : {};
  for (const name of schema.required) {
    if (typeof name === 'string') input[name] = minimalValue(properties[name]);
  }
  return input;
}

/**
 * A value of `schema`: its `const`, else the first of its `enum`, else by `type` (the
 * first non-null one when `type` is a list): `""`, `0`, `false`, `[]`, `null`, or a
 * nested minimal object. Without a type, the first `anyOf`/`oneOf` option decides, an
 * object with `properties` is an object, and anything else is `null`, which an untyped
 * schema accepts.
 */
export function minimalValue(schema: unknown): unknown {
  if (!isRecord(schema)) return null;
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  const type = Array.isArray(schema.type)
    ? (schema.type.find((entry) => entry !== 'null') ?? schema.type[0])
    : schema.type;
  switch (type) {
    case 'string':
      return '';
    case 'number':
    case 'integer':
      return 0;
    case 'boolean':
      return false;
    case 'array':
      return [];
    case 'object':
      return minimalInput(schema);
    case 'null':
      return null;
  }
  const options = Array.isArray(schema.anyOf) ? schema.anyOf : schema.oneOf;
  if (Array.isArray(options) && options.length > 0) return minimalValue(options[0]);
  return isRecord(schema.properties) ? minimalInput(schema) : null;
}

/**
 * Inputs for Anthropic's client-run tools, which have no schema to build one from: the
 * least a client's implementation of each can act on.
 */
const CLIENT_TOOL_INPUTS: Array<[RegExp, Record<string, unknown>]> = [
  [/^bash_\d{8}$/, { command: 'true' }],
  [/^text_editor_\d{8}$/, { command: 'view', path: '.' }],
  [/^memory_\d{8}$/, { command: 'view', path: '/memories' }],
  [/^computer_\d{8}$/, { action: 'screenshot' }],
];

/** The input of a forced call of `tool`, or undefined when the model cannot make one. */
function forcedInput(tool: RequestTool): Record<string, unknown> | undefined {
  if (tool.type === 'custom') return minimalInput(tool.input_schema);
  // Server tools (web search, code execution, …) run on the provider's side, and toolsets
  // hold several tools: the scripted model can call neither.
  return CLIENT_TOOL_INPUTS.find(([pattern]) => pattern.test(tool.type))?.[1];
}

function forcedCall(
  tools: RequestTool[],
  name: string | undefined,
): ExpandedCall | { refused: string } | undefined {
  if (name === undefined) {
    for (const tool of tools) {
      const input = forcedInput(tool);
      if (input !== undefined) return { name: tool.name, input };
    }
    return tools.length === 0
      ? undefined
      : {
          refused:
            'tool_choice "any" needs a tool the scripted model can call: a custom tool, or bash, text_editor, memory or computer; it cannot call server tools or toolsets',
        };
  }
  const tool = tools.find((entry) => entry.name === name);
  if (tool === undefined) return { name, input: {} };
  const input = forcedInput(tool);
  return input === undefined
    ? {
        refused: `tool_choice names \`${name}\` (${tool.type}), which the scripted model cannot call: it runs no server tools or toolsets`,
      }
    : { name, input };
}

/**
 * Bends a turn of the default policy to `tool_choice`, as the real model is bound by it:
 * `none` drops the calls, `any` makes sure of one call, `tool` calls exactly the named
 * tool; with `any` and `tool` the real API emits no text before the tool_use, so the
 * text goes. `disableParallelToolUse` keeps the first call only. A script is never
 * bent: it says exactly what the test wants.
 */
export function applyToolChoice(
  turn: PlannedTurn,
  choice: ToolChoice,
  tools: RequestTool[],
): PlannedTurn | { refused: string } {
  let shaped: PlannedTurn = turn;
  if (choice.type === 'none') shaped = withoutCalls(turn);
  else if (choice.type === 'any' || choice.type === 'tool') {
    const name = choice.type === 'tool' ? choice.name : undefined;
    const kept = name === undefined ? turn.calls : turn.calls.filter((call) => call.name === name);
    const forced = kept.length > 0 ? undefined : forcedCall(tools, name);
    if (forced !== undefined && 'refused' in forced) return forced;
    const calls = forced === undefined ? kept : [forced];
    // No tool to call at all (no tools advertised): leave the turn as the policy made it.
    shaped = calls.length === 0 ? turn : { calls };
  }
  if (choice.disableParallelToolUse && shaped.calls.length > 1) {
    shaped = { ...shaped, calls: shaped.calls.slice(0, 1) };
  }
  return shaped;
}

function withoutCalls(turn: PlannedTurn): PlannedTurn {
  if (turn.calls.length === 0) return turn;
  if (turn.text !== undefined && turn.text !== '') return { text: turn.text, calls: [] };
  const names = [...new Set(turn.calls.map((call) => call.name))].join(', ');
  return {
    text: `tool_choice is "none", so I call no tool (I would have called ${names}).`,
    calls: [],
  };
}
