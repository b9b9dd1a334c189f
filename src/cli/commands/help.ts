import type { ParseArgsConfig } from 'node:util';
import { COMMON_OPTIONS } from '../flags.js';

type Options = NonNullable<ParseArgsConfig['options']>;

/** The common options plus a command's own: the flags `agent`, `run`, `demo` and `batch` take. */
export function commandOptions(own: Options = {}): Options {
  return { ...COMMON_OPTIONS, ...own };
}

/** The common options, as every engine command's help lists them. */
export const COMMON_HELP = `
Engine options:
  --provider anthropic|mock   default: anthropic when ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL
                              is set, else the built-in scripted model (announced on stderr)
  --model M                   model name (default claude-sonnet-5; the built-in model: any)
  --base-url URL              a Messages API server (http or https)
  --request-timeout DURATION  wait for a response's headers (default 2m), per attempt
  --idle-timeout DURATION     wait between two stream events (default 1m)
  --max-tokens N              max_tokens of every request (default 4096)
  --transport undici|sdk      how requests travel: undici (default; a keep-alive pool, least
                              CPU) or sdk (the official SDK over fetch)
  --connections N             undici's connections per server per thread (default: as many
                              as requests in flight)
  --rpm N, --itpm N, --otpm N the account's requests, input and output tokens per minute: the
                              governor's starting values until the provider's headers say
  --max-concurrency N         most requests in flight per model and key (default: adaptive)
  --governor on|off           the rate-limit governor (default on; off sends every request at
                              once and leaves 429s to each agent's own retries)
  --workspace DIR             folder read_file/list_files may read (default: none, no file tools)
  --tools MODULE              an ES module of tools (repeatable); checked before anything starts
  --threads N                 worker threads (default: one per core)
  --agents-per-thread N       children per thread (default 2048)
  --max-depth N               depth below which agents may spawn (default 1)
  --ceiling DURATION          lifetime of an async agent (default 1h)
  --cancel-grace DURATION     how long a cancelled child may ignore it (default 5s; twice that
                              when its worker still answers)
  --worker-heap-mb N          each worker's heap limit
  --log-dir DIR               root of the agents' log folders (default: a new folder under the
                              OS temp dir, cohort/<time>-<pid>)
  --logs all|failed|none      which agents' log folders to keep
  --agents DIR                folder of agent files NAME.md (default: .cohort/agents under the
                              workspace, when it exists); each is checked before anything starts
  --budget JSON               every child agent's default budget, e.g. '{"usd":0.5,"time":"10m"}'
                              (inputTokens, outputTokens, usd, steps, time, tree)
  --prices FILE               a JSON price table over the built-in one, for costUsd:
                              {"MODEL-PREFIX":{"inputPerMTok":3,"outputPerMTok":15}}
  --queue REDIS               run every child on \`cohort worker\` processes taking jobs from
                              this Redis (redis://…, rediss://…, or a socket path) instead of
                              on this machine's threads; see docs/SCALE-OUT.md
  --queue-name NAME           the queue's name (default cohort)
  --queue-rate N/DURATION     at most N tasks start per DURATION across every worker (BullMQ's
                              global rate limit, kept on the queue), e.g. 600/1m
  --otel-endpoint URL         send OpenTelemetry traces over OTLP/HTTP to this collector
  --trace-file FILE           write every span to FILE, one OTLP-shaped JSON object per line
  -h, --help                  this help
Durations: 500ms, 2s, 5m, 1h, or whole milliseconds, up to about 24.8 days.`;

export const EXIT_CODES_HELP = '\nExit codes:';
