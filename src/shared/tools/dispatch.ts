import { Ajv, type ValidateFunction } from 'ajv';
import { describeValue } from '../errors.js';
import type { ToolCall, ToolResultBlock } from '../provider/types.js';
import { redactSecrets } from '../redact.js';
import { renderValue } from '../render.js';
import { REPLY_ACK } from './reply.js';
import { type AnyTool, REPLY_TOOL, SPAWN_TOOLS, type ToolContext } from './types.js';

const ajv = new Ajv({ allErrors: true, strict: false });
const validators = new WeakMap<AnyTool, ValidateFunction>();
/**
 * Compiled schemas by their JSON text. Each child gets its own copies of its host tools (their
 * schemas cross threads in its spec) and of some spawn tools: keyed by the tool alone, every
 * child would compile them again (about 0.75 ms each) and Ajv would keep every copy.
 */
const bySchema = new Map<string, ValidateFunction>();

function validatorFor(tool: AnyTool): ValidateFunction {
  let validate = validators.get(tool);
  if (!validate) {
    const key = JSON.stringify(tool.inputSchema);
    validate = bySchema.get(key);
    if (!validate) {
      validate = ajv.compile(tool.inputSchema);
      bySchema.set(key, validate);
    }
    validators.set(tool, validate);
  }
  return validate;
}

/** Where an agent stands, which decides the tools it may call. */
export interface ToolSetRules {
  depth: number;
  maxDepth: number;
}

/**
 * Whether a tool may be advertised to an agent at this depth: `reply` only below the root, the
 * spawn family only above `maxDepth`.
 */
export function allowedAt(name: string, rules: ToolSetRules): boolean {
  if (name === REPLY_TOOL) return rules.depth >= 1;
  if (SPAWN_TOOLS.includes(name)) return rules.depth < rules.maxDepth;
  return true;
}

export interface BatchOutcome {
  /** One result per call, in call order. */
  results: ToolResultBlock[];
  /** The `result` values of the batch's reply calls, in call order. */
  replies: unknown[];
}

export interface DispatchOptions {
  /** The tools advertised to this agent, by name. `reply` is handled here, not in this map. */
  tools: ReadonlyMap<string, AnyTool>;
  rules: ToolSetRules;
  context: ToolContext;
  onToolResult?: (call: ToolCall, result: ToolResultBlock) => void;
  /** A tool's `run` starts (its input checked out). */
  onToolEnter?: (call: ToolCall) => void;
  /** That `run` returned or threw. */
  onToolExit?: (call: ToolCall) => void;
}

/**
 * Runs every call of one assistant message and answers each exactly once, in call order.
 * Calls run one after another, except `parallel` tools, which start in turn and are joined at the
 * end. Nothing here throws: an unknown tool, bad input or a throwing tool becomes an `is_error`
 * result that says what was expected and what arrived.
 */
export async function dispatchBatch(
  calls: readonly ToolCall[],
  options: DispatchOptions,
): Promise<BatchOutcome> {
  const replies: unknown[] = [];
  const pending: Promise<ToolResultBlock>[] = [];
  for (const call of calls) {
    const running = dispatchOne(call, options, replies);
    if (!options.tools.get(call.name)?.parallel) await running;
    pending.push(running);
  }
  const results = await Promise.all(pending);
  return { results, replies };
}

async function dispatchOne(
  call: ToolCall,
  options: DispatchOptions,
  replies: unknown[],
): Promise<ToolResultBlock> {
  // A cancel stops the rest of the batch: a call that has not started is answered, never run.
  const result = options.context.signal.aborted
    ? notRun(call, 'the agent was cancelled before this call started')
    : await answer(call, options, replies);
  options.onToolResult?.(call, result);
  return result;
}

async function answer(
  call: ToolCall,
  options: DispatchOptions,
  replies: unknown[],
): Promise<ToolResultBlock> {
  const { rules } = options;
  if (call.inputError) return failure(call, `\`${call.name}\` was not run: ${call.inputError}`);
  if (call.name === REPLY_TOOL) {
    if (!allowedAt(REPLY_TOOL, rules)) {
      return failure(
        call,
        '`reply` is only for sub-agents. You are the root agent: answer the user directly.',
      );
    }
    const input = call.input;
    if (typeof input !== 'object' || input === null || !('result' in input)) {
      return failure(
        call,
        `Expected the input of \`reply\` to be an object with a \`result\` field, got ${describeValue(input)}`,
      );
    }
    replies.push((input as { result: unknown }).result);
    return { type: 'tool_result', tool_use_id: call.id, content: REPLY_ACK };
  }
  const tool = options.tools.get(call.name);
  if (!tool || !allowedAt(call.name, rules)) {
    const names = [...options.tools.keys()].filter((name) => allowedAt(name, rules));
    if (rules.depth >= 1) names.push(REPLY_TOOL);
    return failure(
      call,
      `Unknown tool \`${call.name}\`. Expected one of: ${names.map((name) => `\`${name}\``).join(', ') || '(none)'}`,
    );
  }
  const validate = validatorFor(tool);
  if (!validate(call.input)) {
    const problems = (validate.errors ?? [])
      .map((problem) => `${problem.instancePath || '(input)'} ${problem.message ?? 'is invalid'}`)
      .join('; ');
    return failure(
      call,
      `Invalid input for \`${tool.name}\`: ${problems}. Expected input matching ${JSON.stringify(tool.inputSchema)}, got ${describeValue(call.input, 400)}`,
    );
  }
  options.onToolEnter?.(call);
  try {
    const value = await tool.run(call.input, options.context);
    return { type: 'tool_result', tool_use_id: call.id, content: renderValue(value) };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return failure(call, `\`${tool.name}\` failed: ${message}`);
  } finally {
    options.onToolExit?.(call);
  }
}

function failure(call: ToolCall, message: string): ToolResultBlock {
  return {
    type: 'tool_result',
    tool_use_id: call.id,
    content: redactSecrets(message),
    is_error: true,
  };
}

/** The answer for a call that was never run because the agent was stopped first. */
export function notRun(call: ToolCall, why: string): ToolResultBlock {
  return failure(call, `\`${call.name}\` was not run: ${why}`);
}
