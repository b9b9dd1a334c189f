import type { ValidateFunction } from 'ajv';
import { describeValue } from '../errors.js';
import type { ToolCall, ToolResultBlock } from '../provider/types.js';
import { redactSecrets } from '../redact.js';
import { renderValue } from '../render.js';
import type { TraceSink } from '../trace/types.js';
import { GEN_AI } from '../trace/types.js';
import { redactBlocks, ToolContent } from './content.js';
import { outputValidator, schemaAjv } from './output-schema.js';
import { BAD_REPLY_PREFIX, EXTRA_REPLY_TEXT, REPLY_ACK } from './reply.js';
import {
  type CallStop,
  runTimed,
  ToolTimeoutError,
  toolLimitMs,
  toolTimeoutText,
} from './tool-timeout.js';
import { type AnyTool, REPLY_TOOL, SPAWN_TOOLS, type ToolContext } from './types.js';

/** Made on the first schema compiled: the main thread of most commands compiles none. */
let ajv: ReturnType<typeof schemaAjv> | undefined;
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
    validate = schemaValidator(tool.inputSchema);
    validators.set(tool, validate);
  }
  return validate;
}

/** A compiled JSON Schema, once per schema text per thread. Throws when Ajv refuses it. */
export function schemaValidator(schema: object): ValidateFunction {
  const key = JSON.stringify(schema);
  let validate = bySchema.get(key);
  if (!validate) {
    ajv ??= schemaAjv();
    validate = ajv.compile(schema);
    bySchema.set(key, validate);
  }
  return validate;
}

/** What an Ajv validation found wrong, for a message: `/path must be …; …`. */
export function schemaProblems(validate: ValidateFunction, root = '(input)'): string {
  return (validate.errors ?? [])
    .map((problem) => `${problem.instancePath || root} ${problem.message ?? 'is invalid'}`)
    .join('; ');
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
  /** With an output schema: why each refused reply of the batch did not match, in call order. */
  badReplies: string[];
}

export interface DispatchOptions {
  /** The tools advertised to this agent, by name. `reply` is handled here, not in this map. */
  tools: ReadonlyMap<string, AnyTool>;
  rules: ToolSetRules;
  context: ToolContext;
  onToolResult?: (call: ToolCall, result: ToolResultBlock) => void;
  /** A tool's `run` starts (its input checked out), with its time limit (`Infinity`: none). */
  onToolEnter?: (call: ToolCall, limitMs: number) => void;
  /** That `run` returned or threw. */
  onToolExit?: (call: ToolCall) => void;
  /**
   * The schema a reply's `result` must match (a typed reply). A reply that does not is answered
   * with an `is_error` result naming the mismatch and is not taken; only the first matching reply
   * of a batch is taken.
   */
  outputSchema?: Record<string, unknown> | undefined;
  /** Where each call's `execute_tool` span goes, when the agent is traced. */
  trace?: TraceSink | undefined;
  /** The time limit of a call whose tool sets none (`timeoutMs`); default ten minutes. */
  toolTimeoutMs?: number | undefined;
  /**
   * Aborts with `'time'` when the agent's time budget runs out: timed calls still running are
   * stopped and answered, so the budget's last turn comes at once.
   */
  budgetSignal?: AbortSignal | undefined;
}

/** What the calls of one batch found so far: the replies taken, and the refused ones. */
interface BatchState {
  replies: unknown[];
  badReplies: string[];
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
  const state: BatchState = { replies: [], badReplies: [] };
  const pending: Promise<ToolResultBlock>[] = [];
  for (const call of calls) {
    const running = dispatchOne(call, options, state);
    if (!options.tools.get(call.name)?.parallel) await running;
    pending.push(running);
  }
  const results = await Promise.all(pending);
  return { results, replies: state.replies, badReplies: state.badReplies };
}

async function dispatchOne(
  call: ToolCall,
  options: DispatchOptions,
  state: BatchState,
): Promise<ToolResultBlock> {
  // A cancel stops the rest of the batch: a call that has not started is answered, never run.
  // Not a `reply`: its result is already paid for, and taking it runs nothing. Refused, it would
  // be committed as not run, and a rerun resumed from the journal would start from a step that
  // says it failed (the agent ending `empty`, or paying a request to reply again).
  if (options.context.signal.aborted && call.name !== REPLY_TOOL) {
    const result = notRun(call, 'the agent was cancelled before this call started');
    options.onToolResult?.(call, result);
    return result;
  }
  const trace = options.trace;
  const span = trace?.open(`execute_tool ${call.name}`, 'internal', {
    [GEN_AI.operation]: 'execute_tool',
    [GEN_AI.toolName]: call.name,
    [GEN_AI.toolCallId]: call.id,
  });
  const context = { ...options.context, callId: call.id, ...(span === undefined ? {} : { span }) };
  const result = await answer(call, { ...options, context }, state);
  if (span !== undefined) trace?.close(span, {}, result.is_error ? 'tool_error' : undefined);
  options.onToolResult?.(call, result);
  return result;
}

async function answer(
  call: ToolCall,
  options: DispatchOptions,
  state: BatchState,
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
    return takeReply(call, (input as { result: unknown }).result, options, state);
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
    const problems = schemaProblems(validate);
    return failure(
      call,
      `Invalid input for \`${tool.name}\`: ${problems}. Expected input matching ${JSON.stringify(tool.inputSchema)}, got ${describeValue(call.input, 400)}`,
    );
  }
  const limitMs = toolLimitMs(tool, options.toolTimeoutMs);
  options.onToolEnter?.(call, limitMs);
  try {
    // Untimed tools (the spawn family, a child's proxies of host tools) observe the agent's
    // signal themselves and are awaited as they are.
    if (!Number.isFinite(limitMs))
      return toolAnswer(call, await tool.run(call.input, options.context));
    return await timedCall(call, tool, options, limitMs);
  } catch (error) {
    return thrownAnswer(call, tool, error);
  } finally {
    options.onToolExit?.(call);
  }
}

function toolAnswer(call: ToolCall, value: unknown): ToolResultBlock {
  // Blocks pass as they are: an image has no text to render to.
  const content =
    value instanceof ToolContent ? redactBlocks(value.blocks, redactSecrets) : renderValue(value);
  return { type: 'tool_result', tool_use_id: call.id, content };
}

function thrownAnswer(call: ToolCall, tool: AnyTool, error: unknown): ToolResultBlock {
  if (error instanceof ToolTimeoutError) return failure(call, error.message);
  const message = error instanceof Error ? error.message : String(error);
  return failure(call, `\`${tool.name}\` failed: ${message}`);
}

/**
 * A timed call (`runTimed`), stopped also by the agent's cancel and by its time budget running
 * out during the call, and its ending as the model reads it. A tool that blocks its thread lets no
 * timer fire; main's watchdog ends that thread (src/main/runners/local).
 */
async function timedCall(
  call: ToolCall,
  tool: AnyTool,
  options: DispatchOptions,
  limitMs: number,
): Promise<ToolResultBlock> {
  const agentSignal = options.context.signal;
  const budgetSignal = options.budgetSignal;
  const stops: CallStop[] = [{ signal: agentSignal, reason: () => agentSignal.reason }];
  // A budget already spent when the batch began lets it run: its notice follows the batch.
  if (budgetSignal) {
    stops.push({
      signal: budgetSignal,
      applies: () => budgetSignal.reason === 'time',
      reason: () => 'budget: time',
      onlyLater: true,
    });
  }
  const ended = await runTimed(tool, call.input, options.context, limitMs, stops);
  switch (ended.kind) {
    case 'value':
      return toolAnswer(call, ended.value);
    case 'threw':
      return thrownAnswer(call, tool, ended.error);
    case 'timeout':
      return failure(call, toolTimeoutText(tool.name, limitMs));
    case 'stopped':
      return failure(
        call,
        ended.index === 0
          ? `\`${tool.name}\` was stopped: the agent was cancelled`
          : `\`${tool.name}\` was stopped: the agent's time budget ran out`,
      );
  }
}

/** A reply's `result`: taken, or refused when it does not match the output schema. */
function takeReply(
  call: ToolCall,
  result: unknown,
  options: DispatchOptions,
  state: BatchState,
): ToolResultBlock {
  const schema = options.outputSchema;
  if (schema) {
    const validate = outputValidator(schema);
    if (!validate(result)) {
      const problems = schemaProblems(validate, '`result`');
      state.badReplies.push(problems);
      return failure(
        call,
        `${BAD_REPLY_PREFIX}: ${problems}. Expected a \`result\` matching ${describeValue(schema, 600)}, got ${describeValue(result, 400)}. Call \`reply\` again with a corrected \`result\`.`,
      );
    }
    if (state.replies.length > 0) return failure(call, EXTRA_REPLY_TEXT);
  }
  state.replies.push(result);
  return { type: 'tool_result', tool_use_id: call.id, content: REPLY_ACK };
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
