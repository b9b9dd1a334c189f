import Anthropic from '@anthropic-ai/sdk';
import { defined } from '../../option-schema.js';
import type { ProviderConfig } from '../config.js';
import { resolveCredential } from './endpoint.js';
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
 */
export class SdkTransport implements Transport {
  readonly name = 'sdk';
  readonly baseURL: string;
  readonly credential: string;
  readonly #client: Anthropic;

  constructor(config: ProviderConfig, apiKey?: string) {
    this.credential = resolveCredential(apiKey);
    this.#client = new Anthropic({
      // Passed as the key whether it came from ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN: the SDK
      // sends either as `Authorization: Bearer`, and a passed key keeps it from reading others.
      apiKey: this.credential,
      ...defined({ baseURL: config.baseURL }),
      maxRetries: 0,
      timeout: config.requestTimeoutMs,
      // The SDK would print a malformed stream chunk to the console; failures are values here.
      logLevel: 'off',
      ...defined({ defaultHeaders: config.headers }),
    });
    // The client's own base URL: it has resolved ANTHROPIC_BASE_URL and the default already.
    this.baseURL = this.#client.baseURL;
  }

  async send(body: MessagesBody, options: SendOptions): Promise<TransportResponse> {
    const { data, response } = await this.#client.messages
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
