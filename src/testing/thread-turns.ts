/**
 * What a request of the message-threads beta stands for: the request as sent for `create`
 * or no thread; for `continue`, the stored conversation with the new messages after it.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { MessagesRequest } from './messages-api.js';
import { checkConversation } from './request-validation.js';
import { betasOf, invalid, type Refusal } from './requests.js';
import { THREADS_BETA, type ThreadStore } from './threads.js';

/** A checked request after thread resolution, and which thread turn it is. */
export interface ResolvedThread {
  ok: true;
  request: MessagesRequest;
  thread?: { kind: 'create' } | { kind: 'continue'; from: string };
}

/**
 * The fields of a request that message threads do not support, named as the SDK's
 * `ThreadUnsupportedFeatureName` names them (the others it lists are refused anyway).
 */
function threadUnsupported(request: MessagesRequest, body: unknown): string[] {
  const unsupported: string[] = [];
  if (request.thinking.type !== 'disabled') unsupported.push('thinking');
  const cacheControl = (body as { cache_control?: unknown } | undefined)?.cache_control;
  if (cacheControl !== undefined && cacheControl !== null) unsupported.push('cache_control');
  return unsupported;
}

/**
 * Resolves the thread of a checked request. A continue holds its thread (in flight) until
 * the caller calls `store.finish`, whatever becomes of the request.
 */
export function resolveThread(
  store: ThreadStore,
  headers: IncomingHttpHeaders,
  key: string,
  sent: MessagesRequest,
  body: unknown,
): ResolvedThread | { ok: false; refusal: Refusal } {
  const thread = sent.thread;
  if (thread === undefined) return { ok: true, request: sent };
  const unsupported = threadUnsupported(sent, body);
  if (unsupported.length > 0) {
    return {
      ok: false,
      refusal: {
        ...invalid(
          `Expected a request message threads support, got one with ${unsupported.map((name) => `\`${name}\``).join(' and ')}: send the full conversation without \`thread\``,
        ),
        details: { error_code: 'thread_unsupported_request', unsupported },
      },
    };
  }
  if (!betasOf(headers).includes(THREADS_BETA)) {
    return {
      ok: false,
      refusal: invalid(
        `Expected the anthropic-beta header to include \`${THREADS_BETA}\` for \`thread\`, got ${headers['anthropic-beta'] === undefined ? 'no anthropic-beta header' : `\`${headers['anthropic-beta']}\``}`,
      ),
    };
  }
  if (thread.type === 'create') return { ok: true, request: sent, thread: { kind: 'create' } };
  for (const field of ['system', 'tools'] as const) {
    const raw = field === 'system' ? sent.rawSystem : sent.rawTools;
    if (raw !== undefined) {
      return {
        ok: false,
        refusal: invalid(
          `Expected no \`${field}\` with thread {"type": "continue"}: the thread keeps the system prompt and tools it was created with, got \`${field}\``,
        ),
      };
    }
  }
  const begun = store.begin(key, thread.previousMessageId, sent.model);
  if (!begun.ok) return { ok: false, refusal: begun.refusal };
  const { state } = begun;
  const conversation = checkConversation([...state.messages, ...sent.messages], {
    tools: state.tools,
    toolChoice: sent.toolChoice,
    thinking: sent.thinking,
  });
  if (!conversation.ok) {
    store.finish(key, thread.previousMessageId, false);
    return { ok: false, refusal: invalid(conversation.message) };
  }
  const stitched: MessagesRequest = {
    ...sent,
    system: state.system,
    rawSystem: state.rawSystem,
    tools: state.tools,
    rawTools: state.rawTools,
    messages: conversation.value,
    inputChars: state.inputChars + sent.inputChars,
    mediaTokens: state.mediaTokens + sent.mediaTokens,
  };
  return {
    ok: true,
    request: stitched,
    thread: { kind: 'continue', from: thread.previousMessageId },
  };
}
