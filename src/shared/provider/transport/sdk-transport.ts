import type Anthropic from '@anthropic-ai/sdk';
import { defined } from '../../option-schema.js';
import type { ProviderConfig } from '../config.js';
import { resolveBaseURL, resolveCredential } from './endpoint.js';
import {
  ATTEMPT_HEADER,
  type MessagesBody,
  type SendOptions,
  type Transport,
  type TransportResponse,
} from './types.js';

/**
 * The official SDK's path: `messages.create({stream: true})` over Node's global fetch. Kept as a
 * reference the undici transport is held to, and as a fallback.
 *
 * The client runs with `maxRetries: 0`: its own retry sleep does not observe the abort signal, so
 * retries happen in the provider, with an abortable backoff.
 *
 * The SDK is imported on the first send, not with this module: it costs each worker thread about
 * 200 ms of start-up, and the default transport needs only its error classes (from its light
 * `error` entry point).
 */
export class SdkTransport implements Transport {
  readonly name = 'sdk';
  readonly baseURL: string;
  readonly credential: string;
  readonly #config: ProviderConfig;
  #client: Promise<Anthropic> | undefined;

  constructor(config: ProviderConfig, apiKey?: string) {
    this.#config = config;
    this.credential = resolveCredential(apiKey);
    // What the client resolves too: the option, else ANTHROPIC_BASE_URL, else the default.
    this.baseURL = resolveBaseURL(config);
  }

  async send(body: MessagesBody, options: SendOptions): Promise<TransportResponse> {
    this.#client ??= this.#connect();
    const client = await this.#client;
    const { data, response } = await client.messages
      .create(body, {
        signal: options.signal,
        headers: { [ATTEMPT_HEADER]: String(options.attempt) },
      })
      .withResponse();
    return {
      status: response.status,
      headers: response.headers,
      events: data,
      bodyStart: (maxBytes) => bodyStart(response, maxBytes),
    };
  }

  async #connect(): Promise<Anthropic> {
    const { default: Client } = await import('@anthropic-ai/sdk');
    return new Client({
      // Passed as the key whether it came from ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN: the SDK
      // sends either as `Authorization: Bearer`, and a passed key keeps it from reading others.
      apiKey: this.credential,
      baseURL: this.baseURL,
      maxRetries: 0,
      timeout: this.#config.requestTimeoutMs,
      // The SDK would print a malformed stream chunk to the console; failures are values here.
      logLevel: 'off',
      ...defined({ defaultHeaders: this.#config.headers }),
    });
  }

  /** The SDK runs on the global fetch, whose connections are not this transport's to close. */
  async close(): Promise<void> {}
}

/** The first bytes of a body as text. The rest is never read: the connection is let go. */
async function bodyStart(response: Response, maxBytes: number): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < maxBytes) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return new TextDecoder().decode(Buffer.concat(chunks).subarray(0, maxBytes));
}
