import { defaultPolicy, type PlannedTurn } from './default-policy.js';
import {
  type MessagesRequest,
  messageText,
  type OutputBlock,
  type StopReason,
} from './messages-api.js';
import {
  defaultErrorType,
  expandCalls,
  findScriptBlock,
  parseScript,
  type ScriptStep,
} from './script.js';

/** Faults to inject at the fault point: after message_start and the first content delta. */
export interface Faults {
  stallMs: number;
  malformed: boolean;
  /** An SSE `error` event (streaming) or an error status (JSON). */
  error?: { status: number; type: string; message: string };
  disconnect: boolean;
}

/** A response that is an HTTP error, sent after `delayMs`. */
export interface ErrorPlan {
  kind: 'error';
  status: number;
  type: string;
  message: string;
  headers: Record<string, string>;
  delayMs: number;
}

/** A message response: content, usage, the delay before headers, and faults. */
export interface MessagePlan {
  kind: 'message';
  blocks: OutputBlock[];
  stopReason: StopReason;
  inputTokens: number;
  outputTokens: number;
  /** Characters of output (text + tool input JSON), which pacing spends. */
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
  return Math.ceil(characters / 4);
}

/**
 * Decides the whole response from the checked request and the attempt number alone: the
 * step of the conversation's script at this assistant turn, or the default policy.
 */
export function planResponse(request: MessagesRequest, attempt: number): ResponsePlan {
  const turn = request.messages.filter((message) => message.role === 'assistant').length;
  const source = scriptSource(request);
  if (source === undefined) return messagePlan(request, turn, defaultPolicy(request), 0, NO_FAULTS);
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
  return messagePlan(request, turn, turnPlan, delayMs, faulty ? faultsOf(step) : NO_FAULTS);
}

function errorPlan(step: ScriptStep, delayMs: number): ErrorPlan {
  const error = step.error!;
  const type = error.type ?? defaultErrorType(error.status);
  const headers: Record<string, string> = {};
  if (error.retryAfter !== undefined) headers['retry-after'] = String(error.retryAfter);
  if (error.retryAfterMs !== undefined) headers['retry-after-ms'] = String(error.retryAfterMs);
  return {
    kind: 'error',
    status: error.status,
    type,
    message: error.message ?? `Scripted ${error.status} ${type}`,
    headers,
    delayMs,
  };
}

function faultsOf(step: ScriptStep): Faults {
  const faults: Faults = {
    stallMs: step.stall?.ms ?? 0,
    malformed: step.malformed === true,
    disconnect: step.disconnect === true,
  };
  if (step.error !== undefined) {
    const type = step.error.type ?? defaultErrorType(step.error.status);
    faults.error = {
      status: step.error.status,
      type,
      message: step.error.message ?? `Scripted mid-stream ${type}`,
    };
  }
  return faults;
}

function messagePlan(
  request: MessagesRequest,
  turn: number,
  turnPlan: PlannedTurn,
  delayMs: number,
  faults: Faults,
): MessagePlan {
  const blocks: OutputBlock[] = [];
  let outputChars = 0;
  if (turnPlan.text !== undefined && turnPlan.text !== '') {
    blocks.push({ type: 'text', text: turnPlan.text });
    outputChars += turnPlan.text.length;
  }
  turnPlan.calls.forEach((call, index) => {
    const id = call.id ?? `toolu_cohort_${turn}_${index}`;
    blocks.push({ type: 'tool_use', id, name: call.name, input: call.input });
    outputChars += JSON.stringify(call.input).length;
  });
  return {
    kind: 'message',
    blocks,
    stopReason: turnPlan.calls.length > 0 ? 'tool_use' : 'end_turn',
    inputTokens: Math.max(1, estimateTokens(request.inputChars)),
    outputTokens: Math.max(1, estimateTokens(outputChars)),
    outputChars,
    delayMs,
    faults,
  };
}
