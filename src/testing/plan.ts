import { defaultPolicy, type PlannedTurn } from './default-policy.js';
import {
  type ErrorDetails,
  type MessagesRequest,
  messageText,
  type OutputBlock,
  type StopReason,
} from './messages-api.js';
import { CHARS_PER_TOKEN, shapeOutput } from './output-shaping.js';
import { type InputUsage, uncachedUsage } from './prompt-cache.js';
import {
  defaultErrorType,
  expandCalls,
  findScriptBlock,
  parseScript,
  type ScriptError,
  type ScriptStep,
} from './script.js';
import { SPEND_LIMIT_CODES } from './spend-cap.js';
import { signThinking } from './thinking-signature.js';
import { thinkingText } from './thinking-text.js';
import { applyToolChoice } from './tool-choice.js';

/** Faults to inject at the fault point: after message_start and the first content delta. */
export interface Faults {
  stallMs: number;
  malformed: boolean;
  /** An SSE `error` event (streaming) or an error status (JSON). */
  error?: {
    status: number;
    type: string;
    message: string;
    /** Retry headers, for the JSON form, where the error is a plain error response. */
    headers: Record<string, string>;
    /** `error.details`, in the SSE event and in the JSON form alike. */
    details?: ErrorDetails;
  };
  disconnect: boolean;
}

/** A response that is an HTTP error, sent after `delayMs`. */
export interface ErrorPlan {
  kind: 'error';
  status: number;
  type: string;
  message: string;
  headers: Record<string, string>;
  /** `error.details`, from the script's `errorCode`. */
  details?: ErrorDetails;
  delayMs: number;
}

/** A message response: content, usage, the delay before headers, and faults. */
export interface MessagePlan {
  kind: 'message';
  blocks: OutputBlock[];
  stopReason: StopReason;
  /** The stop sequence that ended the text (`stop_reason: "stop_sequence"`), else null. */
  stopSequence: string | null;
  /** The input side of usage: input tokens, and what was read from and written to the cache. */
  input: InputUsage;
  /** ceil(outputChars / 4), at least 1; exactly max_tokens when max_tokens cut the output. */
  outputTokens: number;
  /** Characters of output (thinking + text + tool input JSON, as emitted), which pacing spends. */
  outputChars: number;
  delayMs: number;
  faults: Faults;
}

export type ResponsePlan = ErrorPlan | MessagePlan;

const NO_FAULTS: Faults = { stallMs: 0, malformed: false, disconnect: false };

/** The system prompt first, then the first user message: where a script may be. */
function scriptSource(request: MessagesRequest): string | undefined {
  if (findScriptBlock(request.system).found) return request.system;
  const first = request.messages[0];
  const text = first === undefined ? '' : messageText(first);
  return findScriptBlock(text).found ? text : undefined;
}

function invalid(message: string): ErrorPlan {
  return {
    kind: 'error',
    status: 400,
    type: 'invalid_request_error',
    message,
    headers: {},
    delayMs: 0,
  };
}

/** Tokens are estimated as characters / 4, rounded up. */
export function estimateTokens(characters: number): number {
  return Math.ceil(characters / CHARS_PER_TOKEN);
}

/** The input tokens a request is charged, as `usage.input_tokens` and count_tokens report them. */
export function inputTokens(request: MessagesRequest): number {
  return Math.max(1, estimateTokens(request.inputChars) + request.mediaTokens);
}

/**
 * Decides the whole response from the checked request and the attempt number alone: the
 * step of the conversation's script at this assistant turn, or the default policy. `input`
 * is what the prompt cache decided for the request (default: nothing read or written).
 */
export function planResponse(
  request: MessagesRequest,
  attempt: number,
  input: InputUsage = uncachedUsage(inputTokens(request)),
): ResponsePlan {
  const turn = request.messages.filter((message) => message.role === 'assistant').length;
  const source = scriptSource(request);
  if (source === undefined) {
    // tool_choice binds the policy only: a script is authoritative, it says what the test wants.
    const policyTurn = applyToolChoice(defaultPolicy(request), request.toolChoice, request.tools);
    if ('refused' in policyTurn) return invalid(policyTurn.refused);
    return messagePlan(request, input, turn, policyTurn, 0, NO_FAULTS);
  }
  const parsed = parseScript(source);
  if (!parsed.ok) return invalid(parsed.error);
  const { steps } = parsed.script;
  const step = steps[turn];
  if (step === undefined) {
    return invalid(
      `cohort-script exhausted: conversation is at assistant turn ${turn} but the script has ${steps.length} steps`,
    );
  }
  const faulty = step.faultAttempts === undefined || attempt < step.faultAttempts;
  const delayMs = step.delayMs ?? 0;
  if (faulty && step.error !== undefined && step.error.midStream !== true) {
    return errorPlan(step, delayMs);
  }
  const turnPlan: PlannedTurn = { calls: expandCalls(step) };
  if (step.text !== undefined) turnPlan.text = step.text;
  return messagePlan(request, input, turn, turnPlan, delayMs, faulty ? faultsOf(step) : NO_FAULTS);
}

function errorPlan(step: ScriptStep, delayMs: number): ErrorPlan {
  const error = step.error!;
  const type = error.type ?? defaultErrorType(error.status);
  const plan: ErrorPlan = {
    kind: 'error',
    status: error.status,
    type,
    message: error.message ?? `Scripted ${error.status} ${type}`,
    headers: errorHeaders(error),
    delayMs,
  };
  if (error.errorCode !== undefined) plan.details = { error_code: error.errorCode };
  return plan;
}

/**
 * The headers of a scripted error: the retry headers it sets and `x-should-retry`. The
 * real API sends `retry-after` on every 429 but a spend-limit one, so such a 429 also gets
 * the one it left out: `retry-after` from `retryAfterMs` (whole seconds, rounded up, at
 * least 1) or 1 second when it set neither, and `retry-after-ms` from `retryAfter`.
 */
function errorHeaders(error: ScriptError): Record<string, string> {
  const { status, retryAfter, retryAfterMs, errorCode, shouldRetry } = error;
  const headers: Record<string, string> = {};
  if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter);
  if (retryAfterMs !== undefined) headers['retry-after-ms'] = String(retryAfterMs);
  if (shouldRetry !== undefined) headers['x-should-retry'] = String(shouldRetry);
  // A spend limit is not lifted by waiting, so the real API names no time to retry at.
  if (status !== 429 || (errorCode !== undefined && SPEND_LIMIT_CODES.has(errorCode))) {
    return headers;
  }
  if (retryAfter === undefined) {
    const seconds = retryAfterMs === undefined ? 1 : Math.max(1, Math.ceil(retryAfterMs / 1000));
    headers['retry-after'] = String(seconds);
  } else if (retryAfterMs === undefined) {
    headers['retry-after-ms'] = String(Math.round(retryAfter * 1000));
  }
  return headers;
}

function faultsOf(step: ScriptStep): Faults {
  const faults: Faults = {
    stallMs: step.stall?.ms ?? 0,
    malformed: step.malformed === true,
    disconnect: step.disconnect === true,
  };
  const { error } = step;
  if (error !== undefined) {
    const type = error.type ?? defaultErrorType(error.status);
    faults.error = {
      status: error.status,
      type,
      message: error.message ?? `Scripted mid-stream ${type}`,
      headers: errorHeaders(error),
    };
    if (error.errorCode !== undefined) faults.error.details = { error_code: error.errorCode };
  }
  return faults;
}

function messagePlan(
  request: MessagesRequest,
  input: InputUsage,
  turn: number,
  turnPlan: PlannedTurn,
  delayMs: number,
  faults: Faults,
): MessagePlan {
  const planned: OutputBlock[] = [];
  const thinking = request.thinking.enabled ? thinkingText(request, turn, turnPlan) : '';
  // A budget too small for a single character (adaptive at max_tokens 1) thinks nothing.
  if (thinking !== '') {
    planned.push({ type: 'thinking', thinking, signature: signThinking(thinking) });
  }
  if (turnPlan.text !== undefined && turnPlan.text !== '') {
    planned.push({ type: 'text', text: turnPlan.text });
  }
  turnPlan.calls.forEach((call, index) => {
    const id = call.id ?? `toolu_cohort_${turn}_${index}`;
    planned.push({ type: 'tool_use', id, name: call.name, input: call.input });
  });
  const shaped = shapeOutput(planned, request);
  return {
    kind: 'message',
    blocks: shaped.blocks,
    stopReason: shaped.stopReason,
    stopSequence: shaped.stopSequence,
    input,
    // Cut by max_tokens, the real API reports exactly max_tokens.
    outputTokens: shaped.truncated
      ? request.maxTokens
      : Math.max(1, estimateTokens(shaped.outputChars)),
    outputChars: shaped.outputChars,
    delayMs,
    faults,
  };
}

/** Whether a fault keeps the response from ending in full (a stall does not). */
export function hasBreakingFault(plan: MessagePlan): boolean {
  const { faults } = plan;
  return faults.malformed || faults.disconnect || faults.error !== undefined;
}
