import { parseArgs } from 'node:util';
import { parseDuration } from '../shared/duration.js';
import { UsageError } from '../shared/errors.js';
import { parseNumber, ScriptedModelOptionError, type ScriptedModelOptions } from './load-model.js';
import { startScriptedModel } from './server.js';

/** Where `mockCommand` writes, and what stops it; tests pass their own. */
export interface MockCommandIo {
  stdout?: NodeJS.WritableStream;
  stderr?: NodeJS.WritableStream;
  /** Stops the server like SIGINT would. */
  signal?: AbortSignal;
}

const USAGE = `Usage: cohort mock [options]
Runs the scripted model: an Anthropic Messages API server for offline use.
  --host H           interface to listen on (default 127.0.0.1)
  --port P           port; 0 picks a free one (default 0)
  --ttft-ms MS       time to first token (default 0)
  --tps N            output tokens per second; 0 is unpaced (default 0)
  --jitter J         0..1 random variation of ttft and tps (default 0)
  --rpm N            requests per minute per API key before 429; 0 is unlimited (default 0)
  --itpm N           input tokens per minute per API key; 0 is unlimited (default 0)
  --otpm N           output tokens per minute per API key; 0 is unlimited (default 0)
  --bucket-seconds S seconds of the per-minute limits a full bucket holds, up to 60 (default 60)
  --acceleration F   ramp limit: the request rate may grow to F times its recent average
                     (at least 1/s); 0 is off, else at least 1 (default 0)
  --spend-cap-tokens N
                     spend limit per API key: once its answered requests used N input +
                     output tokens, answer 429 enforced_spend_limit_reached (no retry-after);
                     0 is none (default 0)
  --strict-auth      refuse requests without x-api-key or anthropic-version, as the real API does
  --no-cache         ignore cache_control: cache nothing, and report every cache count as 0
                     (by default prompts are cached per API key and model, as the real API does)
  --overload P       0..1 probability of 529 overloaded (default 0)
  --max-streams N    server capacity: a request that arrives while N responses are being
                     answered gets 529 overloaded at once; 0 is no limit (default 0)
  --chunk-chars N    characters per delta (default 8)
  --seed N           seed of the random choices (default 1)
  --batch-latency DURATION
                     how long a Message Batch takes to end after it is created, like 500ms,
                     2s or 5m; 0 ends it at once, past 24h it expires first (default 1s)
  --batch-error P    0..1 share of the requests in a Message Batch that come back errored
                     (api_error), rolled per request from the seed (default 0)
  --batch-expire P   0..1 share of Message Batches that expire: such a batch reaches its
                     deadline at its latency with half its requests processed, and the rest
                     come back expired (default 0)
  --batch-queue N    the most requests a key may have in Message Batches in progress; a
                     create past it gets 429 rate_limit_error with retry-after (default 0,
                     no limit)
  -h, --help         this help
It serves until SIGINT, SIGTERM or SIGHUP. The engine options of the other commands do not
apply here. A conversation with no cohort-script gets the default policy: it reads the files
and folders its prompt names and replies with a digest, or with a value made from its reply's
schema (docs/SCRIPTED-MODEL.md).

Exit codes:
  0  stopped by a signal after closing cleanly
  2  a usage error: a bad flag
`;

const FLAGS = {
  host: { type: 'string' },
  port: { type: 'string' },
  'ttft-ms': { type: 'string' },
  tps: { type: 'string' },
  jitter: { type: 'string' },
  rpm: { type: 'string' },
  itpm: { type: 'string' },
  otpm: { type: 'string' },
  'bucket-seconds': { type: 'string' },
  acceleration: { type: 'string' },
  'spend-cap-tokens': { type: 'string' },
  'strict-auth': { type: 'boolean' },
  'no-cache': { type: 'boolean' },
  overload: { type: 'string' },
  'max-streams': { type: 'string' },
  'chunk-chars': { type: 'string' },
  seed: { type: 'string' },
  'batch-latency': { type: 'string' },
  'batch-error': { type: 'string' },
  'batch-expire': { type: 'string' },
  'batch-queue': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Parses `cohort mock` flags into server options; throws ScriptedModelOptionError. */
export function parseMockFlags(argv: string[]): ScriptedModelOptions | 'help' {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: argv, options: FLAGS, strict: true, allowPositionals: false }));
  } catch (error) {
    throw new ScriptedModelOptionError(error instanceof Error ? error.message : String(error));
  }
  if (values.help === true) return 'help';
  const options: ScriptedModelOptions = {};
  const number = (flag: string, rule: Parameters<typeof parseNumber>[2]): number | undefined => {
    const text = values[flag];
    return typeof text === 'string' ? parseNumber(`--${flag}`, text, rule) : undefined;
  };
  if (typeof values.host === 'string') {
    if (values.host === '')
      throw new ScriptedModelOptionError('Expected --host to be a non-empty string, got ``');
    options.host = values.host;
  }
  const assign = <K extends keyof ScriptedModelOptions>(
    key: K,
    value: number | undefined,
  ): void => {
    if (value !== undefined) (options as Record<K, number>)[key] = value;
  };
  assign('port', number('port', 'port'));
  assign('ttftMs', number('ttft-ms', 'non-negative'));
  assign('tokensPerSecond', number('tps', 'non-negative'));
  assign('jitter', number('jitter', 'fraction'));
  assign('rpm', number('rpm', 'non-negative-integer'));
  assign('itpm', number('itpm', 'non-negative-integer'));
  assign('otpm', number('otpm', 'non-negative-integer'));
  assign('bucketSeconds', number('bucket-seconds', 'bucket-seconds'));
  assign('acceleration', number('acceleration', 'acceleration'));
  assign('spendCapTokens', number('spend-cap-tokens', 'non-negative-integer'));
  if (values['strict-auth'] === true) options.strictAuth = true;
  if (values['no-cache'] === true) options.cache = false;
  assign('overloadProbability', number('overload', 'fraction'));
  assign('maxStreams', number('max-streams', 'non-negative-integer'));
  assign('chunkChars', number('chunk-chars', 'positive-integer'));
  assign('seed', number('seed', 'integer'));
  const latency = values['batch-latency'];
  if (typeof latency === 'string') options.batchLatencyMs = durationOption(latency);
  assign('batchErrorProbability', number('batch-error', 'fraction'));
  assign('batchExpireProbability', number('batch-expire', 'fraction'));
  assign('batchQueueSize', number('batch-queue', 'non-negative-integer'));
  return options;
}

/** `--batch-latency`, a duration as every duration flag of cohort takes one. */
function durationOption(text: string): number {
  try {
    return parseDuration(text, '--batch-latency');
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    throw new ScriptedModelOptionError(error.message);
  }
}

/**
 * `cohort mock`: starts the scripted model, prints one line
 * `cohort scripted model listening on URL`, and serves until SIGINT, SIGTERM or
 * `io.signal`. Resolves to the exit code: 0, or 2 for a bad flag.
 */
export async function mockCommand(argv: string[], io: MockCommandIo = {}): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  let options: ScriptedModelOptions | 'help';
  try {
    options = parseMockFlags(argv);
  } catch (error) {
    if (!(error instanceof ScriptedModelOptionError)) throw error;
    stderr.write(`cohort mock: ${error.message}\n\n${USAGE}`);
    return 2;
  }
  if (options === 'help') {
    stdout.write(USAGE);
    return 0;
  }
  const model = await startScriptedModel(options);
  stdout.write(`cohort scripted model listening on ${model.url}\n`);
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      process.off('SIGHUP', stop);
      io.signal?.removeEventListener('abort', stop);
      resolve();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    process.once('SIGHUP', stop);
    if (io.signal?.aborted === true) stop();
    else io.signal?.addEventListener('abort', stop, { once: true });
  });
  await model.close();
  return 0;
}
