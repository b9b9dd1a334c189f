import { getEventListeners } from 'node:events';
import { expect } from 'vitest';
import {
  API_KEY_ENV,
  DEFAULT_PROVIDER_CONFIG,
  type ProviderConfig,
} from '../src/shared/provider/config.js';
import { Provider } from '../src/shared/provider/provider.js';
import type { TransportName } from '../src/shared/provider/transport/types.js';
import type {
  AssistantTurn,
  ProviderErrorCode,
  ProviderRequest,
  ProviderResult,
  RetryInfo,
} from '../src/shared/provider/types.js';
import type { ScriptStep } from '../src/testing/index.js';
import { scriptedPrompt, type Target } from './transport-servers.js';

/**
 * How the transport conformance suite runs one scenario through one transport, and what it
 * checks of the outcome. The scenarios themselves are in transport-conformance.test.ts.
 */

/** What both transports must give. */
export interface Expected {
  /** `ok` for a turn, else the code of the `ProviderError`. */
  code: ProviderErrorCode | 'ok';
  calls: number;
  status?: number;
  /** What the error's message must match. */
  says?: RegExp;
  /** Fields the turn must have. */
  turn?: Partial<AssistantTurn>;
  /** The `waitMs` of each retry, when headers set them; otherwise each wait is the 1 ms step. */
  waits?: number[];
  /** Requests the server received; defaults to `calls`. */
  requests?: number;
}

export interface Scenario {
  name: string;
  /** Starts a fresh server for one transport to talk to. */
  serve: () => Promise<Target>;
  /** The script the request carries; only the scripted model reads it. */
  steps?: ScriptStep[];
  config?: Partial<ProviderConfig>;
  /** The caller aborts its signal when the server gets the request, or at the first delta. */
  abortWhen?: 'request' | 'first-delta';
  expected: Expected;
}

/** What one transport did with one scenario. */
export interface Outcome {
  result: ProviderResult;
  retries: RetryInfo[];
  deltas: string[];
  requests: number;
  /** Abort listeners left on the caller's signal: the per-attempt controller must let go. */
  listeners: number;
}

function providerFor(transport: TransportName, url: string, config: Partial<ProviderConfig>) {
  return new Provider({
    ...DEFAULT_PROVIDER_CONFIG,
    model: 'cohort-scripted',
    baseURL: url,
    transport,
    maxRetries: 1,
    // Tiny steps: the jittered wait is then always 1 ms, so retries compare exactly.
    backoffBaseMs: 1,
    backoffMaxMs: 1,
    requestTimeoutMs: 10_000,
    idleTimeoutMs: 10_000,
    ...config,
  });
}

function requestFor(steps: ScriptStep[]): ProviderRequest {
  return {
    messages: [{ role: 'user', content: scriptedPrompt(steps) }],
    tools: [
      { name: 'lookup', description: 'Looks something up.', input_schema: { type: 'object' } },
      { name: 'reply', description: 'Replies.', input_schema: { type: 'object' } },
    ],
  };
}

export async function runThrough(transport: TransportName, scenario: Scenario): Promise<Outcome> {
  const target = await scenario.serve();
  const provider = providerFor(transport, target.url, scenario.config ?? {});
  const caller = new AbortController();
  const { signal } = caller;
  const abort = () => caller.abort('the caller gave up');
  if (scenario.abortWhen === 'request') target.onRequest(abort);
  const retries: RetryInfo[] = [];
  const deltas: string[] = [];
  try {
    const result = await provider.complete(requestFor(scenario.steps ?? []), {
      signal,
      onRetry: (info) => retries.push(info),
      onTextDelta: (text) => {
        deltas.push(text);
        if (scenario.abortWhen === 'first-delta') abort();
      },
    });
    const listeners = getEventListeners(signal, 'abort').length;
    const outcome = { result, retries, deltas, requests: target.requests(), listeners };
    return withoutPort(outcome, `127.0.0.1:${target.port}`);
  } finally {
    await provider.close();
    await target.close();
  }
}

/** `value` with `host` in every string replaced by `127.0.0.1:PORT`: the same for both runs. */
function withoutPort<T>(value: T, host: string): T {
  if (typeof value === 'string') return value.replaceAll(host, '127.0.0.1:PORT') as T;
  if (Array.isArray(value)) return value.map((item) => withoutPort(item, host)) as T;
  if (typeof value !== 'object' || value === null) return value;
  const entries = Object.entries(value).map(([key, item]) => [key, withoutPort(item, host)]);
  return Object.fromEntries(entries) as T;
}

/** Checks one transport's outcome against what the scenario expects. */
export function expectOutcome(
  transport: TransportName,
  outcome: Outcome,
  expected: Expected,
): void {
  const { result } = outcome;
  const where = `the ${transport} transport`;
  const summary = result.ok
    ? { code: 'ok', calls: result.calls }
    : { ...result.error, calls: result.calls };
  expect(summary, where).toMatchObject({
    code: expected.code,
    calls: expected.calls,
    ...(expected.status === undefined ? {} : { status: expected.status }),
  });
  if (!result.ok) {
    if (expected.status === undefined) expect(result.error.status, where).toBeUndefined();
    if (expected.says) expect(result.error.message, where).toMatch(expected.says);
  }
  if (result.ok && expected.turn) expect(result.turn, where).toMatchObject(expected.turn);
  expect(outcome.requests, `${where}: requests the server received`).toBe(
    expected.requests ?? expected.calls,
  );
  expect(outcome.listeners, `${where}: abort listeners left`).toBe(0);
  const key = process.env[API_KEY_ENV];
  if (key) expect(JSON.stringify(outcome), `${where}: the API key shown`).not.toContain(key);
  // Every retry before the last call; the last one is the answer or the failure given up on.
  const waits = expected.waits ?? Array.from({ length: expected.calls - 1 }, () => 1);
  expect(
    outcome.retries.map((info) => info.waitMs),
    `${where}: retry waits`,
  ).toEqual(waits);
}
