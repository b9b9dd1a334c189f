import type {
  ErrorDetails,
  MessagesRequest,
  OutputBlock,
  RequestBlock,
  RequestMessage,
} from './messages-api.js';

/** The beta a request must name in `anthropic-beta` to use `thread`. */
export const THREADS_BETA = 'message-threads-2026-08-12';

/** How many responses a server holds; past it the least recently used one is forgotten. */
const MAX_THREADS = 10_000;
/** Characters of stored conversations a server holds, at most; past it, the same. */
const MAX_STORED_CHARS = 256 * 1024 * 1024;

/** What a thread holds after a turn: the request fields it was created with and the conversation. */
export type ThreadState = Pick<
  MessagesRequest,
  'model' | 'system' | 'rawSystem' | 'tools' | 'rawTools' | 'inputChars' | 'mediaTokens'
> & {
  /** Every message so far, the last reply included, merged by role. */
  messages: RequestMessage[];
};

interface StoredTurn extends ThreadState {
  key: string;
  continued: boolean;
  inFlight: boolean;
}

/** A refusal of a thread request, as the real API words it. */
export interface ThreadRefusal {
  status: number;
  type: string;
  message: string;
  details?: ErrorDetails;
}

/**
 * The server side of the message-threads beta. `thread: {type: "create"}` stores the
 * conversation under the response's message id once the response has ended in full;
 * `{type: "continue", previous_message_id}` resumes from one stored response, once: the
 * request sends only the new messages, and the server puts the stored ones before them.
 * A response that did not end in full (a fault, a client that went away) stores nothing,
 * as the real server holds either the whole reply or none of it.
 */
export class ThreadStore {
  /** `key \0 message id` → stored turn; a Map keeps use order for the eviction. */
  readonly #turns = new Map<string, StoredTurn>();
  /** Sum of the `inputChars` of the conversations still held. */
  #storedChars = 0;

  /**
   * Starts continuing from `previousMessageId`: the stored state, marked in flight until
   * `finish`, or why the request is refused.
   */
  begin(
    key: string,
    previousMessageId: string,
    model: string,
  ): { ok: true; state: ThreadState } | { ok: false; refusal: ThreadRefusal } {
    const id = `${key}\u0000${previousMessageId}`;
    const turn = this.#turns.get(id);
    if (turn === undefined) {
      return refuse(
        404,
        'not_found_error',
        'thread_not_found',
        `No thread state for previous_message_id \`${previousMessageId}\`: it is unknown to this server, was forgotten, or its response did not end in full. Send the full conversation with thread {"type": "create"}.`,
      );
    }
    this.#turns.delete(id);
    this.#turns.set(id, turn);
    if (turn.inFlight) {
      return refuse(
        400,
        'invalid_request_error',
        'thread_continue_in_flight',
        `Another request is still continuing from \`${previousMessageId}\`; continue from its response, or send the full conversation with thread {"type": "create"}.`,
      );
    }
    if (turn.continued) {
      return refuse(
        400,
        'invalid_request_error',
        'thread_already_continued',
        `Response \`${previousMessageId}\` has already been continued, and each response can be continued only once. Continue from the thread's most recent response.`,
      );
    }
    if (model !== turn.model) {
      return refuse(
        400,
        'invalid_request_error',
        'thread_fingerprint_mismatch',
        `Expected \`model\` to be ${JSON.stringify(turn.model)}, the model the thread was created with, got ${JSON.stringify(model)}`,
      );
    }
    turn.inFlight = true;
    return { ok: true, state: turn };
  }

  /** Ends a continue begun with `begin`: on success the response it continued is used up. */
  finish(key: string, previousMessageId: string, succeeded: boolean): void {
    const turn = this.#turns.get(`${key}\u0000${previousMessageId}`);
    if (turn === undefined) return;
    turn.inFlight = false;
    if (!succeeded || turn.continued) return;
    // A used-up response is only ever refused from now on: keep the mark, not the conversation.
    turn.continued = true;
    this.#storedChars -= turn.inputChars;
    turn.messages = [];
    turn.tools = [];
    turn.rawSystem = undefined;
    turn.rawTools = undefined;
    turn.system = '';
    turn.inputChars = 0;
  }

  /** Stores the conversation with its reply under the reply's message id. */
  store(key: string, messageId: string, request: MessagesRequest, reply: OutputBlock[]): void {
    const blocks = reply.map(asRequestBlock);
    const inputChars = request.inputChars + JSON.stringify(blocks).length;
    this.#storedChars += inputChars;
    this.#turns.set(`${key}\u0000${messageId}`, {
      model: request.model,
      system: request.system,
      rawSystem: request.rawSystem,
      tools: request.tools,
      rawTools: request.rawTools,
      // What the next turn is charged for the stored part: the conversation and the reply.
      inputChars,
      mediaTokens: request.mediaTokens,
      messages: [...request.messages, { role: 'assistant', blocks }],
      key,
      continued: false,
      inFlight: false,
    });
    while (this.#turns.size > MAX_THREADS || this.#storedChars > MAX_STORED_CHARS) {
      const oldest = this.#turns.entries().next();
      if (oldest.done === true) break;
      this.#turns.delete(oldest.value[0]);
      this.#storedChars -= oldest.value[1].inputChars;
    }
  }
}

function refuse(
  status: number,
  type: string,
  errorCode: string,
  message: string,
): { ok: false; refusal: ThreadRefusal } {
  return { ok: false, refusal: { status, type, message, details: { error_code: errorCode } } };
}

/** A reply block as the client received it: a tool_use cut by max_tokens has input `{}`. */
function asRequestBlock(block: OutputBlock): RequestBlock {
  if (block.type !== 'tool_use') return block;
  const input = block.partialJson === undefined ? block.input : {};
  return { type: 'tool_use', id: block.id, name: block.name, input };
}
