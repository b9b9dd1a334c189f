import type Anthropic from '@anthropic-ai/sdk';

/**
 * How a provider reaches a Messages-API server (docs/ARCHITECTURE.md, "Transports"):
 * - `undici`: a keep-alive undici pool and an SSE parser of our own choosing, the default;
 * - `sdk`: the official SDK's `messages.create({stream: true})` over the global fetch.
 */
export type TransportName = 'undici' | 'sdk';

export const TRANSPORT_NAMES: readonly TransportName[] = ['undici', 'sdk'];

export const DEFAULT_TRANSPORT: TransportName = 'undici';

/** Header that tells a server which attempt this is (0 first). The scripted model reads it. */
export const ATTEMPT_HEADER = 'x-cohort-attempt';

/** The body of one streamed Messages request. The SDK stays the source of its type. */
export type MessagesBody = Anthropic.MessageCreateParamsStreaming;

/** One stream event as the Messages API sends it, parsed. */
export type StreamEvent = Anthropic.RawMessageStreamEvent;

export interface SendOptions {
  /** The attempt's own signal: aborting it ends this request and nothing else. */
  signal: AbortSignal;
  /** Which attempt this is, 0 first; sent as the `x-cohort-attempt` header. */
  attempt: number;
}

/**
 * A request the server answered with a 2xx status. Reading `events` consumes the body; a body
 * that is not an event stream is judged from `bodyStart` instead, which reads only its start.
 */
export interface TransportResponse {
  status: number;
  headers: Headers;
  /**
   * The parsed events, `ping`s left out. Iteration throws what the SDK's stream throws: an
   * `APIError` with no status for an `error` event, a `SyntaxError` for data that is not JSON,
   * and the connection's own error when the body breaks off. It ends quietly when the signal
   * aborts mid-body (the SDK does the same; the provider says why it ended).
   */
  events: AsyncIterable<StreamEvent>;
  /** The body's first `maxBytes` as text; the rest is let go. Use instead of `events`. */
  bodyStart(maxBytes: number): Promise<string>;
}

/**
 * Sends Messages requests. One per provider config per thread; it holds the connections.
 *
 * `send` rejects with the error classes of `@anthropic-ai/sdk` (`APIError` from
 * `APIError.generate` for a non-2xx status, `APIConnectionError`, `APIConnectionTimeoutError`,
 * `APIUserAbortError`), so one `classify` maps both transports to the same `ProviderError`s.
 */
export interface Transport {
  readonly name: TransportName;
  /** The base URL in use, resolved: the config's, else ANTHROPIC_BASE_URL, else the API's. */
  readonly baseURL: string;
  /** The key or token sent, for the governor's account hash only; never logged. */
  readonly credential: string;
  send(body: MessagesBody, options: SendOptions): Promise<TransportResponse>;
  /** Lets go of pooled connections. */
  close(): Promise<void>;
}
