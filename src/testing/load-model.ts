import type { IncomingHttpHeaders } from 'node:http';
import { performance } from 'node:perf_hooks';
import { describeValue } from '../shared/errors.js';
import { fnv1a, seededRandom } from './hash.js';

/**
 * Options of `startScriptedModel`. Every one but `clock` can also be set by a `cohort mock`
 * flag.
 */
export interface ScriptedModelOptions {
  /** Interface to listen on. Default `127.0.0.1`. */
  host?: string;
  /** Port; 0 (the default) picks a free one. */
  port?: number;
  /** Time to first token in ms: the first content delta waits this long. Default 0. */
  ttftMs?: number;
  /** Output pacing in tokens (≈ 4 characters) per second; 0, the default, is unpaced. */
  tokensPerSecond?: number;
  /** 0..1: each request scales ttft and pacing by a random factor in [1 - j, 1 + j]. Default 0. */
  jitter?: number;
  /** Requests per minute, per API key; 0, the default, is unlimited. */
  rpm?: number;
  /** Input tokens per minute, per API key; 0, the default, is unlimited. */
  itpm?: number;
  /** Output tokens per minute, per API key, counted as generated; 0, the default, is unlimited. */
  otpm?: number;
  /**
   * Seconds of the per-minute limits a full bucket holds, above 0 and at most 60 (the
   * default, as the real API). A smaller value makes a short run feel the limit.
   */
  bucketSeconds?: number;
  /**
   * A ramp limit: the request rate may grow to at most this factor times its recent
   * average (at least 1 request/s), so a sudden jump is refused. 0, the default, is off;
   * otherwise at least 1.
   */
  acceleration?: number;
  /**
   * A spend limit per API key, in tokens: once the input + output tokens of the messages
   * it answered for a key reach this, every further messages request of that key gets the
   * spend-limit 429 (`enforced_spend_limit_reached`, no `retry-after`). 0, the default, is none.
   */
  spendCapTokens?: number;
  /** Refuse requests without `x-api-key` or `anthropic-version`, as the real API does. Default false. */
  strictAuth?: boolean;
  /**
   * Prompt caching, as the real API does it: `cache_control` breakpoints read and write a
   * cache per API key and model, and usage reports `cache_creation_input_tokens` and
   * `cache_read_input_tokens`. Default true. False is a server that ignores `cache_control`:
   * it is accepted, never refused, and every cache count is 0.
   */
  cache?: boolean;
  /** 0..1: chance that a request is answered 529 overloaded_error. Default 0. */
  overloadProbability?: number;
  /**
   * A server capacity: a messages request that arrives while this many responses are being
   * answered (waiting for their ttft or delay, or started and not yet ended) is answered
   * `529 overloaded_error` at once. 0, the default, is no limit.
   */
  maxStreams?: number;
  /** Characters per text or input_json delta. Default 8. */
  chunkChars?: number;
  /** Seed of every random choice (jitter, overload, the batch faults). Default 1. */
  seed?: number;
  /**
   * How long a Message Batch takes, in ms: it ends this long after it was created, its
   * requests processed one after another over that time. Default 1000. 0 ends a batch at
   * once; past 24 hours a batch expires first, as the real API's do.
   */
  batchLatencyMs?: number;
  /**
   * 0..1: the share of the requests in a Message Batch that come back `errored`
   * (`api_error`) instead of succeeding, rolled per request from the seed. Default 0.
   */
  batchErrorProbability?: number;
  /**
   * 0..1: the share of Message Batches that expire instead of ending: such a batch reaches
   * its deadline (`batchLatencyMs` after creation) with only the first half of its requests
   * processed, and the rest come back `expired`. Rolled per batch from the seed. Default 0.
   */
  batchExpireProbability?: number;
  /**
   * The most requests this API key may have in Message Batches still in progress (the real API's
   * "batch requests in processing queue" limit of its tier). A create that would go past it is
   * refused 429 `rate_limit_error`, with a `retry-after` of the seconds until the first of its
   * batches in progress ends. 0 (default) is no limit.
   */
  batchQueueSize?: number;
  /**
   * The server's monotonic clock in ms, which times pacing, ttft, delays, the rate-limit
   * buckets and the prompt cache's lifetimes. Default `performance.now()`. A test that must
   * see minutes pass passes a clock it can move forward, e.g.
   * `() => performance.now() + skippedMs`; it must never run slower than real time, since
   * the server's timers wait in real time for it. No flag: it is for code.
   */
  clock?: () => number;
}

/** Options with every default filled in. */
export type ResolvedOptions = Required<ScriptedModelOptions>;

/** A user mistake in options, flags or headers; the message says what was expected and what arrived. */
export class ScriptedModelOptionError extends Error {
  readonly code = 'SCRIPTED_MODEL_BAD_OPTION';
  override readonly name = 'ScriptedModelOptionError';
}

export type Rule =
  | 'non-negative'
  | 'fraction'
  | 'positive-integer'
  | 'non-negative-integer'
  | 'port'
  | 'integer'
  | 'bucket-seconds'
  | 'acceleration';

const RULE_TEXT: Record<Rule, string> = {
  'non-negative': 'a non-negative number',
  fraction: 'a number from 0 to 1',
  'positive-integer': 'an integer from 1 and up',
  'non-negative-integer': 'an integer from 0 and up',
  'bucket-seconds': 'a number above 0 and at most 60',
  acceleration: '0 (off) or a number from 1 and up',
  port: 'an integer from 0 to 65535',
  integer: 'an integer',
};

function satisfies(value: number, rule: Rule): boolean {
  if (!Number.isFinite(value)) return false;
  switch (rule) {
    case 'non-negative':
      return value >= 0;
    case 'fraction':
      return value >= 0 && value <= 1;
    case 'positive-integer':
      return Number.isInteger(value) && value >= 1;
    case 'non-negative-integer':
      return Number.isInteger(value) && value >= 0;
    case 'bucket-seconds':
      return value > 0 && value <= 60;
    case 'acceleration':
      return value === 0 || value >= 1;
    case 'port':
      return Number.isInteger(value) && value >= 0 && value <= 65535;
    case 'integer':
      return Number.isInteger(value);
  }
}

/** Checks a number against a rule; `label` names it in the message (`ttftMs`, `--tps`, a header). */
export function checkNumber(label: string, value: unknown, rule: Rule): number {
  if (typeof value !== 'number' || !satisfies(value, rule)) {
    throw new ScriptedModelOptionError(
      `Expected ${label} to be ${RULE_TEXT[rule]}, got ${describeValue(value, 80, { quoteStrings: true })}`,
    );
  }
  return value;
}

/** Checks a boolean option; `label` names it in the message. */
export function checkBoolean(label: string, value: unknown): boolean {
  if (typeof value !== 'boolean') {
    throw new ScriptedModelOptionError(
      `Expected ${label} to be true or false, got ${describeValue(value, 80, { quoteStrings: true })}`,
    );
  }
  return value;
}

/** Parses text (a flag or header value) as a number under a rule. */
export function parseNumber(label: string, text: string, rule: Rule): number {
  const trimmed = text.trim();
  const value = trimmed === '' ? Number.NaN : Number(trimmed);
  if (!satisfies(value, rule)) {
    throw new ScriptedModelOptionError(
      `Expected ${label} to be ${RULE_TEXT[rule]}, got \`${text}\``,
    );
  }
  return value;
}

/** Fills in defaults and checks every option; throws ScriptedModelOptionError. */
export function resolveOptions(options: ScriptedModelOptions = {}): ResolvedOptions {
  const host = options.host ?? '127.0.0.1';
  if (typeof host !== 'string' || host === '') {
    throw new ScriptedModelOptionError(
      `Expected \`host\` to be a non-empty string, got ${describeValue(host, 80, { quoteStrings: true })}`,
    );
  }
  return {
    host,
    port: checkNumber('`port`', options.port ?? 0, 'port'),
    ttftMs: checkNumber('`ttftMs`', options.ttftMs ?? 0, 'non-negative'),
    tokensPerSecond: checkNumber('`tokensPerSecond`', options.tokensPerSecond ?? 0, 'non-negative'),
    jitter: checkNumber('`jitter`', options.jitter ?? 0, 'fraction'),
    rpm: checkNumber('`rpm`', options.rpm ?? 0, 'non-negative-integer'),
    itpm: checkNumber('`itpm`', options.itpm ?? 0, 'non-negative-integer'),
    otpm: checkNumber('`otpm`', options.otpm ?? 0, 'non-negative-integer'),
    bucketSeconds: checkNumber('`bucketSeconds`', options.bucketSeconds ?? 60, 'bucket-seconds'),
    acceleration: checkNumber('`acceleration`', options.acceleration ?? 0, 'acceleration'),
    spendCapTokens: checkNumber(
      '`spendCapTokens`',
      options.spendCapTokens ?? 0,
      'non-negative-integer',
    ),
    strictAuth: checkBoolean('`strictAuth`', options.strictAuth ?? false),
    cache: checkBoolean('`cache`', options.cache ?? true),
    overloadProbability: checkNumber(
      '`overloadProbability`',
      options.overloadProbability ?? 0,
      'fraction',
    ),
    maxStreams: checkNumber('`maxStreams`', options.maxStreams ?? 0, 'non-negative-integer'),
    chunkChars: checkNumber('`chunkChars`', options.chunkChars ?? 8, 'positive-integer'),
    seed: checkNumber('`seed`', options.seed ?? 1, 'integer'),
    batchLatencyMs: checkNumber('`batchLatencyMs`', options.batchLatencyMs ?? 1000, 'non-negative'),
    batchErrorProbability: checkNumber(
      '`batchErrorProbability`',
      options.batchErrorProbability ?? 0,
      'fraction',
    ),
    batchExpireProbability: checkNumber(
      '`batchExpireProbability`',
      options.batchExpireProbability ?? 0,
      'fraction',
    ),
    batchQueueSize: checkNumber(
      '`batchQueueSize`',
      options.batchQueueSize ?? 0,
      'non-negative-integer',
    ),
    clock: checkClock(options.clock),
  };
}

function checkClock(clock: unknown): () => number {
  if (clock === undefined) return () => performance.now();
  if (typeof clock !== 'function') {
    throw new ScriptedModelOptionError(
      `Expected \`clock\` to be a function that returns ms, got ${describeValue(clock, 80, { quoteStrings: true })}`,
    );
  }
  return clock as () => number;
}

/** The load settings of one request: server options, then per-request header overrides. */
export interface RequestLoad {
  attempt: number;
  ttftMs: number;
  tokensPerSecond: number;
  jitter: number;
  overloadProbability: number;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Reads `x-cohort-*` headers over the server options; throws ScriptedModelOptionError. */
export function requestLoad(headers: IncomingHttpHeaders, options: ResolvedOptions): RequestLoad {
  const read = (name: string, rule: Rule, fallback: number): number => {
    const text = header(headers, name);
    return text === undefined ? fallback : parseNumber(`header \`${name}\``, text, rule);
  };
  const attempt = read('x-cohort-attempt', 'integer', 0);
  if (attempt < 0) {
    throw new ScriptedModelOptionError(
      `Expected header \`x-cohort-attempt\` to be a non-negative integer, got \`${attempt}\``,
    );
  }
  return {
    attempt,
    ttftMs: read('x-cohort-ttft-ms', 'non-negative', options.ttftMs),
    tokensPerSecond: read('x-cohort-tps', 'non-negative', options.tokensPerSecond),
    jitter: read('x-cohort-jitter', 'fraction', options.jitter),
    overloadProbability: read('x-cohort-overload', 'fraction', options.overloadProbability),
  };
}

/** What the load model decided for one request. */
export interface RequestFate {
  overloaded: boolean;
  ttftMs: number;
  /** Output characters per millisecond; 0 is unpaced. */
  charsPerMs: number;
}

/**
 * Rolls jitter and overload for one request. The random stream is seeded from the server
 * seed, the request body and the attempt, so a request gets the same fate in every run,
 * whatever order concurrent requests arrive in.
 */
export function decideFate(load: RequestLoad, seed: number, body: string): RequestFate {
  const needsRandom = load.jitter > 0 || load.overloadProbability > 0;
  const random = needsRandom
    ? seededRandom(fnv1a(`${seed}\u0000${load.attempt}\u0000${body}`))
    : () => 0.5;
  const overloaded = load.overloadProbability > 0 && random() < load.overloadProbability;
  const scale = (): number => 1 + load.jitter * (2 * random() - 1);
  const ttftMs = load.ttftMs * scale();
  const tokensPerSecond = load.tokensPerSecond * scale();
  return { overloaded, ttftMs, charsPerMs: (tokensPerSecond * 4) / 1000 };
}
