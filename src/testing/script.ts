import { describeValue } from '../shared/errors.js';
import { isRecord } from './is-record.js';

/** A tool call a step makes. `input` defaults to `{}`; `id` defaults to a deterministic id. */
export interface ScriptToolCall {
  name: string;
  input?: Record<string, unknown>;
  id?: string;
}

/** Shorthand for `{"name":"reply","input":{"result": reply}}`. */
export interface ScriptReplyCall {
  reply: unknown;
}

export type ScriptCall = ScriptToolCall | ScriptReplyCall;

/** An HTTP error, or with `midStream` an SSE `error` event after the first delta. */
export interface ScriptError {
  status: number;
  /** Defaults by status: 429 rate_limit_error, 529 overloaded_error, 400 invalid_request_error, else api_error. */
  type?: string;
  message?: string;
  /** Seconds, sent as the `retry-after` header. */
  retryAfter?: number;
  /** Milliseconds, sent as the `retry-after-ms` header. */
  retryAfterMs?: number;
  /**
   * Sent as `error.details.error_code` (the SDK's `errorCode`, which picks its error class,
   * e.g. `enforced_spend_limit_reached`). Lowercase letters, digits and `_`.
   */
  errorCode?: string;
  /** Sent as the `x-should-retry: true|false` header, which the SDK obeys over its own rules. */
  shouldRetry?: boolean;
  midStream?: boolean;
}

/** What the model does at one assistant turn. See docs/SCRIPTED-MODEL.md. */
export interface ScriptStep {
  /** A text block, streamed as text deltas. */
  text?: string;
  /** tool_use blocks, in order, after the text. */
  calls?: ScriptCall[];
  /** Shorthand: a reply call appended after `calls`. Any JSON value, null included. */
  reply?: unknown;
  /** Wait this long before sending the response headers. */
  delayMs?: number;
  error?: ScriptError;
  /** After message_start and the first delta, send nothing for `ms`, then go on. */
  stall?: { ms: number };
  /** After message_start and the first delta, destroy the socket. */
  disconnect?: boolean;
  /** After the first delta, send an SSE event whose data is not JSON. */
  malformed?: boolean;
  /** Faults (error, stall, disconnect, malformed) apply only while `x-cohort-attempt` < this. */
  faultAttempts?: number;
}

/** A script: step k is played at the k-th assistant turn (0-based). */
export interface Script {
  steps: ScriptStep[];
}

export type ParsedScript = { ok: true; script: Script } | { ok: false; error: string };

/** The fence tag that marks a script block in a prompt. */
export const SCRIPT_TAG = 'cohort-script';

const FENCE_OPEN = /^```cohort-script[ \t]*$/m;
const FENCE_BLOCK = /^```cohort-script[ \t]*\r?\n([\s\S]*?)\r?\n```[ \t]*$/m;
const STEP_KEYS = new Set([
  'text',
  'calls',
  'reply',
  'delayMs',
  'error',
  'stall',
  'disconnect',
  'malformed',
  'faultAttempts',
]);
const ERROR_KEYS = new Set([
  'status',
  'type',
  'message',
  'retryAfter',
  'retryAfterMs',
  'errorCode',
  'shouldRetry',
  'midStream',
]);
const TOOL_ID = /^[A-Za-z0-9_-]+$/;
const ERROR_CODE = /^[a-z0-9_]+$/;

/**
 * Returns the fenced block that carries `script`, ready to paste into a system prompt, a
 * user message, or the `prompt` of an `agent` tool call.
 */
export function scriptBlock(script: Script | readonly ScriptStep[]): string {
  return `\`\`\`${SCRIPT_TAG}\n${JSON.stringify(script)}\n\`\`\``;
}

/** Where a cohort-script fence is in `text`, if any. */
export type ScriptSearch =
  | { found: false }
  | { found: true; json: string }
  | { found: true; error: string };

/** Finds the first cohort-script block in `text` and returns its body. */
export function findScriptBlock(text: string): ScriptSearch {
  if (!text.includes('```cohort-script') || !FENCE_OPEN.test(text)) return { found: false };
  const match = FENCE_BLOCK.exec(text);
  if (!match) {
    return {
      found: true,
      error: 'Expected a line "```" closing the ```cohort-script block, got the end of the text',
    };
  }
  return { found: true, json: match[1] ?? '' };
}

/**
 * Parses a script. `text` is either text that contains a cohort-script block (the first
 * block is used) or the script JSON itself. Never throws; an error names what was
 * expected and what arrived.
 */
export function parseScript(text: string): ParsedScript {
  const search = findScriptBlock(text);
  if (search.found && 'error' in search) return { ok: false, error: search.error };
  const json = search.found ? search.json : text;
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return {
      ok: false,
      error: `Expected the cohort-script to be JSON, got a parse error: ${reason}`,
    };
  }
  return checkScript(value);
}

/** Checks an already parsed script value. */
export function checkScript(value: unknown): ParsedScript {
  const steps = Array.isArray(value) ? value : isRecord(value) ? value.steps : undefined;
  if (!Array.isArray(steps)) {
    return {
      ok: false,
      error: `Expected the cohort-script to be {"steps": [...]} or an array of steps, got ${describeValue(value, 80, { quoteStrings: true })}`,
    };
  }
  if (isRecord(value)) {
    const extra = Object.keys(value).find((key) => key !== 'steps');
    if (extra !== undefined) {
      return {
        ok: false,
        error: `Expected the cohort-script to have only the key \`steps\`, got \`${extra}\``,
      };
    }
  }
  for (let index = 0; index < steps.length; index++) {
    const problem = checkStep(steps[index], `steps.${index}`);
    if (problem !== undefined) return { ok: false, error: `Invalid cohort-script: ${problem}` };
  }
  return { ok: true, script: { steps: steps as ScriptStep[] } };
}

function expected(path: string, what: string, got: unknown): string {
  return `expected \`${path}\` to be ${what}, got ${describeValue(got, 80, { quoteStrings: true })}`;
}

function isNonNegative(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}

function checkStep(step: unknown, path: string): string | undefined {
  if (!isRecord(step)) return expected(path, 'an object', step);
  const unknownKey = Object.keys(step).find((key) => !STEP_KEYS.has(key));
  if (unknownKey !== undefined) {
    return `expected \`${path}\` to have only the keys ${[...STEP_KEYS].join(', ')}; got \`${unknownKey}\``;
  }
  const { text, calls, delayMs, error, stall, disconnect, malformed, faultAttempts } = step;
  if (text !== undefined && typeof text !== 'string')
    return expected(`${path}.text`, 'a string', text);
  if (calls !== undefined) {
    if (!Array.isArray(calls)) return expected(`${path}.calls`, 'an array', calls);
    for (let index = 0; index < calls.length; index++) {
      const problem = checkCall(calls[index], `${path}.calls.${index}`);
      if (problem !== undefined) return problem;
    }
  }
  if (delayMs !== undefined && !isNonNegative(delayMs)) {
    return expected(`${path}.delayMs`, 'a non-negative number', delayMs);
  }
  if (error !== undefined) {
    const problem = checkError(error, `${path}.error`);
    if (problem !== undefined) return problem;
  }
  if (stall !== undefined) {
    if (!isRecord(stall) || !isNonNegative(stall.ms) || Object.keys(stall).length !== 1) {
      return expected(`${path}.stall`, '{"ms": a non-negative number}', stall);
    }
  }
  if (disconnect !== undefined && typeof disconnect !== 'boolean') {
    return expected(`${path}.disconnect`, 'a boolean', disconnect);
  }
  if (malformed !== undefined && typeof malformed !== 'boolean') {
    return expected(`${path}.malformed`, 'a boolean', malformed);
  }
  if (
    faultAttempts !== undefined &&
    !(typeof faultAttempts === 'number' && Number.isInteger(faultAttempts) && faultAttempts >= 0)
  ) {
    return expected(`${path}.faultAttempts`, 'a non-negative integer', faultAttempts);
  }
  return undefined;
}

function checkCall(call: unknown, path: string): string | undefined {
  if (!isRecord(call)) return expected(path, '{"name", "input"?, "id"?} or {"reply"}', call);
  if ('reply' in call) {
    if (Object.keys(call).length !== 1) {
      return `expected \`${path}\` to be {"reply": value} with no other key, got keys ${Object.keys(call).join(', ')}`;
    }
    return undefined;
  }
  const { name, input, id } = call;
  const extra = Object.keys(call).find((key) => key !== 'name' && key !== 'input' && key !== 'id');
  if (extra !== undefined) {
    return `expected \`${path}\` to have only the keys name, input, id; got \`${extra}\``;
  }
  if (typeof name !== 'string' || name.length === 0) {
    return expected(`${path}.name`, 'a non-empty string', name);
  }
  if (input !== undefined && !isRecord(input)) return expected(`${path}.input`, 'an object', input);
  if (id !== undefined && (typeof id !== 'string' || !TOOL_ID.test(id))) {
    return expected(`${path}.id`, 'a string of letters, digits, _ and -', id);
  }
  return undefined;
}

function checkError(error: unknown, path: string): string | undefined {
  if (!isRecord(error)) return expected(path, 'an object with a status', error);
  const extra = Object.keys(error).find((key) => !ERROR_KEYS.has(key));
  if (extra !== undefined) {
    return `expected \`${path}\` to have only the keys ${[...ERROR_KEYS].join(', ')}; got \`${extra}\``;
  }
  const { status, type, message, retryAfter, retryAfterMs, errorCode, shouldRetry, midStream } =
    error;
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 400 || status > 599) {
    return expected(`${path}.status`, 'an integer from 400 to 599', status);
  }
  if (type !== undefined && (typeof type !== 'string' || type.length === 0)) {
    return expected(`${path}.type`, 'a non-empty string', type);
  }
  if (message !== undefined && typeof message !== 'string') {
    return expected(`${path}.message`, 'a string', message);
  }
  if (retryAfter !== undefined && !isNonNegative(retryAfter)) {
    return expected(`${path}.retryAfter`, 'a non-negative number of seconds', retryAfter);
  }
  if (retryAfterMs !== undefined && !isNonNegative(retryAfterMs)) {
    return expected(`${path}.retryAfterMs`, 'a non-negative number of milliseconds', retryAfterMs);
  }
  if (errorCode !== undefined && (typeof errorCode !== 'string' || !ERROR_CODE.test(errorCode))) {
    return expected(
      `${path}.errorCode`,
      'a non-empty string of lowercase letters, digits and _',
      errorCode,
    );
  }
  if (shouldRetry !== undefined && typeof shouldRetry !== 'boolean') {
    return expected(`${path}.shouldRetry`, 'a boolean', shouldRetry);
  }
  if (midStream !== undefined && typeof midStream !== 'boolean') {
    return expected(`${path}.midStream`, 'a boolean', midStream);
  }
  return undefined;
}

/** A call of a step with the shorthands expanded. */
export interface ExpandedCall {
  name: string;
  input: Record<string, unknown>;
  id?: string;
}

/** The tool calls of a step in order: `calls` with reply shorthands expanded, then `reply`. */
export function expandCalls(step: ScriptStep): ExpandedCall[] {
  const calls: ExpandedCall[] = [];
  for (const call of step.calls ?? []) {
    if ('reply' in call) calls.push({ name: 'reply', input: { result: call.reply } });
    else {
      const expanded: ExpandedCall = { name: call.name, input: call.input ?? {} };
      if (call.id !== undefined) expanded.id = call.id;
      calls.push(expanded);
    }
  }
  if ('reply' in step) calls.push({ name: 'reply', input: { result: step.reply } });
  return calls;
}

/** Default error type for a status, as the real API uses them. */
export function defaultErrorType(status: number): string {
  switch (status) {
    case 400:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 529:
      return 'overloaded_error';
    default:
      return 'api_error';
  }
}
