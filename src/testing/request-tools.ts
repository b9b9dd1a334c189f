import { isRecord } from './is-record.js';
import type { RequestTool, ToolChoice } from './messages-api.js';
import {
  checkCacheControl,
  checkKeys,
  checkOptionalString,
  fail,
  failExtra,
} from './request-problem.js';

// The real API's pattern for a custom tool's name; compiled once, not per request.
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,128}$/;
// An Anthropic-defined tool's type: a family, then the date of its version.
const VERSIONED_TYPE = /^(.+)_(\d{8})$/;

// The keys each kind of tool may have, from SDK 1.14's `Tool` and the Anthropic tool types
// (`ToolUnion`, and `BetaToolUnion` for computer use and the advisor). A family takes the keys
// of all its versions, since any dated version is accepted. Anything else is an extra input.
const COMMON_KEYS = ['type', 'name', 'allowed_callers', 'cache_control', 'defer_loading', 'strict'];
const EXAMPLE_KEYS = [...COMMON_KEYS, 'input_examples'];
const WEB_KEYS = [
  ...COMMON_KEYS,
  'allowed_domains',
  'blocked_domains',
  'max_uses',
  'response_inclusion',
];
const TOOLSET_KEYS = ['type', 'cache_control', 'configs'];
const CUSTOM_KEYS = new Set([
  ...EXAMPLE_KEYS,
  'input_schema',
  'description',
  'eager_input_streaming',
]);

interface ToolFamily {
  /** The names a tool of the family must carry; null for a toolset, which has no name. */
  names: readonly string[] | null;
  keys: ReadonlySet<string>;
}

function family(names: readonly string[] | null, keys: readonly string[]): ToolFamily {
  return { names, keys: new Set(keys) };
}

/**
 * The families of Anthropic-defined tools (SDK 1.14's `ToolUnion` and `BetaToolUnion`), the
 * names each must carry and the keys each may have. A toolset has no name; it is listed under
 * its type. Any `_YYYYMMDD` version is accepted, so a newer version of a known family passes.
 */
const ANTHROPIC_FAMILIES = new Map<string, ToolFamily>([
  ['bash', family(['bash'], EXAMPLE_KEYS)],
  ['code_execution', family(['code_execution'], COMMON_KEYS)],
  [
    'computer',
    family(
      ['computer'],
      [...EXAMPLE_KEYS, 'display_width_px', 'display_height_px', 'display_number', 'enable_zoom'],
    ),
  ],
  ['memory', family(['memory'], EXAMPLE_KEYS)],
  [
    'text_editor',
    family(
      ['str_replace_editor', 'str_replace_based_edit_tool'],
      [...EXAMPLE_KEYS, 'max_characters'],
    ),
  ],
  ['web_search', family(['web_search'], [...WEB_KEYS, 'user_location'])],
  [
    'web_fetch',
    family(
      ['web_fetch'],
      [...WEB_KEYS, 'citations', 'max_content_tokens', 'url_sources', 'use_cache'],
    ),
  ],
  ['tool_search_tool_bm25', family(['tool_search_tool_bm25'], COMMON_KEYS)],
  ['tool_search_tool_regex', family(['tool_search_tool_regex'], COMMON_KEYS)],
  ['advisor', family(['advisor'], [...COMMON_KEYS, 'model', 'caching', 'max_tokens', 'max_uses'])],
  ['browser_toolset', family(null, TOOLSET_KEYS)],
  ['computer_toolset', family(null, TOOLSET_KEYS)],
]);
const FLAG_KEYS = ['strict', 'defer_loading', 'eager_input_streaming'];
// The tool-search tools are also accepted by their undated type.
const UNDATED_TYPES = new Set(['tool_search_tool_bm25', 'tool_search_tool_regex']);
const TOOL_TYPES = `"custom" (a tool with an input_schema) or an Anthropic tool type: ${[
  ...ANTHROPIC_FAMILIES.keys(),
]
  .map((family) => `${family}_YYYYMMDD`)
  .join(', ')}`;

/** Checks `tools`: custom tools with a schema, Anthropic tools by versioned type; unique names. */
export function checkTools(tools: unknown): RequestTool[] {
  if (tools === undefined) return [];
  if (!Array.isArray(tools)) fail('tools', 'an array', tools);
  const names = new Set<string>();
  return tools.map((tool: unknown, index) => {
    const path = `tools.${index}`;
    if (!isRecord(tool)) fail(path, 'a tool object', tool);
    checkCacheControl(tool.cache_control, `${path}.cache_control`);
    const checked =
      tool.type === undefined || tool.type === null || tool.type === 'custom'
        ? checkCustomTool(tool, path)
        : checkAnthropicTool(tool, path);
    if (names.has(checked.name)) fail(`${path}.name`, 'a tool name not used before', checked.name);
    names.add(checked.name);
    return checked;
  });
}

function checkCustomTool(tool: Record<string, unknown>, path: string): RequestTool {
  checkKeys(tool, CUSTOM_KEYS, path);
  checkFlags(tool, path);
  const { name, input_schema: inputSchema } = tool;
  if (typeof name !== 'string' || !TOOL_NAME.test(name)) {
    fail(`${path}.name`, '1 to 128 letters, digits, "_" or "-"', name);
  }
  checkOptionalString(tool.description, `${path}.description`);
  if (!isRecord(inputSchema)) fail(`${path}.input_schema`, 'an object', inputSchema);
  if (inputSchema.type !== 'object') {
    fail(`${path}.input_schema.type`, '"object"', inputSchema.type);
  }
  return { name, type: 'custom', input_schema: inputSchema };
}

function checkAnthropicTool(tool: Record<string, unknown>, path: string): RequestTool {
  const { type, name } = tool;
  if (type === 'mcp_toolset') {
    fail(`${path}.type`, `${TOOL_TYPES} (the scripted model does not support MCP toolsets)`, type);
  }
  const known = typeof type === 'string' ? toolFamily(type) : undefined;
  if (typeof type !== 'string' || known === undefined) fail(`${path}.type`, TOOL_TYPES, type);
  checkKeys(tool, known.keys, path);
  checkFlags(tool, path);
  const allowedNames = known.names;
  if (allowedNames === null) return { name: type, type };
  if (typeof name !== 'string' || !allowedNames.includes(name)) {
    fail(
      `${path}.name`,
      `${allowedNames.map((n) => `"${n}"`).join(' or ')} for a ${type} tool`,
      name,
    );
  }
  return { name, type };
}

/** The family of an Anthropic tool type, or undefined for a type of no known family. */
function toolFamily(type: string): ToolFamily | undefined {
  const name = UNDATED_TYPES.has(type) ? type : VERSIONED_TYPE.exec(type)?.[1];
  return name === undefined ? undefined : ANTHROPIC_FAMILIES.get(name);
}

/** The boolean switches a tool may carry, checked for their type. */
function checkFlags(tool: Record<string, unknown>, path: string): void {
  for (const key of FLAG_KEYS) {
    const value = tool[key];
    if (value === undefined || typeof value === 'boolean') continue;
    // eager_input_streaming alone is nullable in the SDK.
    if (value === null && key === 'eager_input_streaming') continue;
    fail(`${path}.${key}`, 'a boolean', value);
  }
}

/** Checks the shape of `tool_choice`; whether it names an advertised tool is checked later. */
export function checkToolChoice(value: unknown): ToolChoice {
  if (value === undefined) return { type: 'auto', disableParallelToolUse: false };
  if (!isRecord(value)) fail('tool_choice', 'an object such as {"type": "auto"}', value);
  const { type, name, disable_parallel_tool_use: disableParallel } = value;
  if (type !== 'auto' && type !== 'any' && type !== 'tool' && type !== 'none') {
    fail('tool_choice.type', '"auto", "any", "tool" or "none"', type);
  }
  for (const key in value) {
    const allowed =
      key === 'type' ||
      (key === 'name' && type === 'tool') ||
      (key === 'disable_parallel_tool_use' && type !== 'none');
    if (!allowed) failExtra(`tool_choice.${key}`);
  }
  if (disableParallel !== undefined && typeof disableParallel !== 'boolean') {
    fail('tool_choice.disable_parallel_tool_use', 'a boolean', disableParallel);
  }
  const choice: ToolChoice = { type, disableParallelToolUse: disableParallel === true };
  if (type === 'tool') {
    if (typeof name !== 'string' || name.length === 0) {
      fail('tool_choice.name', 'a non-empty string', name);
    }
    choice.name = name;
  }
  return choice;
}
