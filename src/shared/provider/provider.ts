import Anthropic, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from '@anthropic-ai/sdk';
import { delay } from 'abort-controller-x';
import { redactSecrets } from '../redact.js';
import { API_KEY_ENV, PLACEHOLDER_KEY, type ProviderConfig } from './config.js';
import { backoffMs, isRetryable } from './retry.js';
import type {
  AssistantTurn,
  CompleteOptions,
  ContentBlockParam,
  ProviderError,
  ProviderRequest,
  ProviderResult,
  ProviderUsage,
  ToolCall,
} from './types.js';

/** Header that tells a server which attempt this is (0 first). The scripted model reads it. */
export const ATTEMPT_HEADER = 'x-cohort-attempt';

/** Why our own code aborted a request's controller, as opposed to the caller's signal. */
const STALLED = Symbol('stalled');

/**
 * Talks to a Messages-API server. One instance per config per thread; it holds one SDK client.
 *
 * The SDK runs with `maxRetries: 0`: its own retry sleep does not observe the abort signal, so
 * retries happen here, with an abortable backoff. Each attempt has its own AbortController linked
 * to the caller's signal, so aborting one request never aborts another.
 */
export class Provider {
  readonly config: ProviderConfig;
  readonly #client: Anthropic;

  constructor(config: ProviderConfig) {
    this.config = config;
    this.#client = new Anthropic({
      apiKey: process.env[API_KEY_ENV] || PLACEHOLDER_KEY,
      ...(config.baseURL === undefined ? {} : { baseURL: config.baseURL }),
      maxRetries: 0,
      timeout: config.requestTimeoutMs,
      // The SDK would print a malformed stream chunk to the console; failures are values here.
      logLevel: 'off',
      ...(config.headers === undefined ? {} : { defaultHeaders: config.headers }),
    });
  }

  async complete(request: ProviderRequest, options: CompleteOptions): Promise<ProviderResult> {
    const usage: ProviderUsage = { inputTokens: 0, outputTokens: 0 };
    let calls = 0;
    for (let attempt = 0; ; attempt++) {
      if (options.signal.aborted) return aborted(calls, usage, options.signal);
      calls++;
      const outcome = await this.#attempt(request, attempt, options);
      if (outcome.ok) return { ok: true, turn: outcome.turn, calls };
      usage.inputTokens += outcome.usage.inputTokens;
      usage.outputTokens += outcome.usage.outputTokens;
      const error = outcome.error;
      if (
        error.code === 'aborted' ||
        !isRetryable(error.code) ||
        attempt >= this.config.maxRetries
      ) {
        return { ok: false, error, calls, usage };
      }
      const waitMs = backoffMs({
        retry: attempt,
        baseMs: this.config.backoffBaseMs,
        maxMs: this.config.backoffMaxMs,
        headers: outcome.headers,
      });
      options.onRetry?.({ attempt, waitMs, error });
      try {
        await delay(options.signal, waitMs);
      } catch {
        return aborted(calls, usage, options.signal);
      }
    }
  }

  async #attempt(
    request: ProviderRequest,
    attempt: number,
    options: CompleteOptions,
  ): Promise<
    | { ok: true; turn: AssistantTurn }
    | { ok: false; error: ProviderError; headers?: Headers | undefined; usage: ProviderUsage }
  > {
    const controller = new AbortController();
    const onAbort = () => controller.abort(options.signal.reason);
    options.signal.addEventListener('abort', onAbort, { once: true });
    const idleMs = this.config.idleTimeoutMs;
    let idleTimer: NodeJS.Timeout | undefined;
    const armIdle = () => {
      if (idleTimer) idleTimer.refresh();
      else idleTimer = setTimeout(() => controller.abort(STALLED), idleMs);
    };
    const assembler = new TurnAssembler();
    try {
      // Until headers arrive the SDK's own timeout applies; the idle limit covers the stream.
      const stream = await this.#client.messages.create(
        {
          model: request.model ?? this.config.model,
          max_tokens: this.config.maxTokens,
          messages: request.messages,
          ...(request.system === undefined ? {} : { system: request.system }),
          ...(request.tools.length === 0 ? {} : { tools: request.tools }),
          stream: true,
        },
        { signal: controller.signal, headers: { [ATTEMPT_HEADER]: String(attempt) } },
      );
      armIdle();
      for await (const event of stream) {
        armIdle();
        const delta = assembler.push(event);
        if (delta && options.onTextDelta) options.onTextDelta(delta);
      }
      // The SDK ends an aborted stream quietly instead of throwing: say why it ended.
      if (controller.signal.aborted) throw controller.signal.reason;
      return assembler.finish();
    } catch (error) {
      if (options.signal.aborted) {
        return { ok: false, error: abortError(options.signal), usage: assembler.usage };
      }
      if (controller.signal.aborted && controller.signal.reason === STALLED) {
        return {
          ok: false,
          error: { code: 'stalled', message: `no stream event for ${idleMs} ms` },
          usage: assembler.usage,
        };
      }
      return { ok: false, ...classify(error), usage: assembler.usage };
    } finally {
      if (idleTimer) clearTimeout(idleTimer);
      options.signal.removeEventListener('abort', onAbort);
    }
  }
}

function aborted(calls: number, usage: ProviderUsage, signal: AbortSignal): ProviderResult {
  return { ok: false, error: abortError(signal), calls, usage };
}

function abortError(signal: AbortSignal): ProviderError {
  const reason = signal.reason;
  const text = typeof reason === 'string' ? reason : reason instanceof Error ? reason.message : '';
  return { code: 'aborted', message: text ? `aborted: ${text}` : 'aborted' };
}

/** Maps whatever the SDK threw to a stable code. The message is redacted of secrets. */
export function classify(error: unknown): { error: ProviderError; headers?: Headers | undefined } {
  const message = redactSecrets(error instanceof Error ? error.message : String(error));
  if (error instanceof APIUserAbortError) return { error: { code: 'aborted', message } };
  if (error instanceof APIConnectionTimeoutError) {
    return { error: { code: 'connection', message: `timed out waiting for response headers` } };
  }
  if (error instanceof APIConnectionError) return { error: { code: 'connection', message } };
  if (error instanceof APIError) {
    const status = error.status;
    const headers = error.headers;
    const base = { message, ...(status === undefined ? {} : { status }) };
    if (status === 429) return { error: { code: 'rate_limited', ...base }, headers };
    if (status === 529) return { error: { code: 'overloaded', ...base }, headers };
    if (status === undefined) {
      // An `error` event inside an SSE stream has no status; its type says what it was.
      const body = error.error as { error?: { type?: unknown } } | undefined;
      const type = error.type ?? body?.error?.type;
      if (type === 'overloaded_error') return { error: { code: 'overloaded', ...base } };
      if (type === 'rate_limit_error') return { error: { code: 'rate_limited', ...base } };
      return { error: { code: 'server_error', ...base } };
    }
    if (status >= 500) return { error: { code: 'server_error', ...base }, headers };
    return { error: { code: 'bad_request', ...base }, headers };
  }
  // Unparsable data in the stream (or a non-streaming body): the server's fault, worth a retry.
  if (
    error instanceof SyntaxError ||
    (error instanceof Error && error.cause instanceof SyntaxError)
  ) {
    return { error: { code: 'bad_response', message } };
  }
  // A stream that ended early: a connection fault, worth a retry.
  if (
    error instanceof Error &&
    /premature|\bterminated\b|ECONNRESET|socket|other side closed/i.test(message)
  ) {
    return { error: { code: 'connection', message } };
  }
  return { error: { code: 'bad_response', message } };
}

type StreamEvent = Anthropic.RawMessageStreamEvent;

interface OpenBlock {
  kind: 'text' | 'tool_use';
  text: string;
  id: string;
  name: string;
  json: string;
}

/** Builds the assistant turn from raw stream events. */
class TurnAssembler {
  readonly usage: ProviderUsage = { inputTokens: 0, outputTokens: 0 };
  #blocks: OpenBlock[] = [];
  #stopReason: string | null = null;
  #stopped = false;

  /** Returns the text delta carried by the event, if any. */
  push(event: StreamEvent): string | undefined {
    switch (event.type) {
      case 'message_start':
        this.usage.inputTokens = event.message.usage.input_tokens;
        this.usage.outputTokens = event.message.usage.output_tokens;
        return undefined;
      case 'content_block_start': {
        const block = event.content_block;
        if (block.type === 'text') {
          this.#blocks[event.index] = {
            kind: 'text',
            text: block.text,
            id: '',
            name: '',
            json: '',
          };
        } else if (block.type === 'tool_use') {
          this.#blocks[event.index] = {
            kind: 'tool_use',
            text: '',
            id: block.id,
            name: block.name,
            json: '',
          };
        }
        return undefined;
      }
      case 'content_block_delta': {
        const open = this.#blocks[event.index];
        if (!open) return undefined;
        if (event.delta.type === 'text_delta') {
          open.text += event.delta.text;
          return event.delta.text;
        }
        if (event.delta.type === 'input_json_delta') open.json += event.delta.partial_json;
        return undefined;
      }
      case 'message_delta':
        this.#stopReason = event.delta.stop_reason ?? null;
        this.usage.outputTokens = event.usage.output_tokens;
        return undefined;
      case 'message_stop':
        this.#stopped = true;
        return undefined;
      default:
        return undefined;
    }
  }

  finish():
    | { ok: true; turn: AssistantTurn }
    | { ok: false; error: ProviderError; usage: ProviderUsage } {
    if (!this.#stopped) {
      return {
        ok: false,
        error: { code: 'connection', message: 'stream ended before message_stop' },
        usage: this.usage,
      };
    }
    const content: ContentBlockParam[] = [];
    const calls: ToolCall[] = [];
    let text = '';
    for (const block of this.#blocks) {
      if (!block) continue;
      if (block.kind === 'text') {
        // The API refuses empty text blocks in a request, so they never enter the transcript.
        if (block.text === '') continue;
        text += block.text;
        content.push({ type: 'text', text: block.text });
        continue;
      }
      const call: ToolCall = { id: block.id, name: block.name, input: {} };
      if (block.json.trim() !== '') {
        try {
          call.input = JSON.parse(block.json);
        } catch {
          call.inputError = `its arguments were not valid JSON: ${block.json.slice(0, 200)}`;
        }
      }
      const echoed = isPlainObject(call.input) ? call.input : {};
      content.push({ type: 'tool_use', id: call.id, name: call.name, input: echoed });
      calls.push(call);
    }
    // The API refuses an assistant message with no content; say plainly that there was none.
    if (content.length === 0) content.push({ type: 'text', text: '(no output)' });
    return {
      ok: true,
      turn: {
        message: { role: 'assistant', content },
        text,
        calls,
        stopReason: this.#stopReason,
        usage: { ...this.usage },
      },
    };
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
