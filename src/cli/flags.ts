import { type ParseArgsConfig, parseArgs } from 'node:util';
import { parseDuration } from '../shared/duration.js';
import { UsageError } from '../shared/errors.js';
import { accepts, type Field } from '../shared/option-schema.js';

/** Options every command takes (DESIGN §3). */
export const COMMON_OPTIONS = {
  provider: { type: 'string' },
  model: { type: 'string' },
  'base-url': { type: 'string' },
  'request-timeout': { type: 'string' },
  'idle-timeout': { type: 'string' },
  'max-tokens': { type: 'string' },
  transport: { type: 'string' },
  connections: { type: 'string' },
  governor: { type: 'string' },
  rpm: { type: 'string' },
  itpm: { type: 'string' },
  otpm: { type: 'string' },
  'max-concurrency': { type: 'string' },
  threads: { type: 'string' },
  'agents-per-thread': { type: 'string' },
  ceiling: { type: 'string' },
  'log-dir': { type: 'string' },
  logs: { type: 'string' },
  'max-depth': { type: 'string' },
  workspace: { type: 'string' },
  tools: { type: 'string', multiple: true },
  'worker-heap-mb': { type: 'string' },
  'cancel-grace': { type: 'string' },
  agents: { type: 'string' },
  budget: { type: 'string' },
  prices: { type: 'string' },
  'otel-endpoint': { type: 'string' },
  'trace-file': { type: 'string' },
  queue: { type: 'string' },
  'queue-name': { type: 'string' },
  'queue-rate': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

export type ParsedValues = Record<string, string | boolean | string[] | undefined>;

/** parseArgs with our error shape: a bad flag is a UsageError naming it. */
export function parseCommand(
  argv: string[],
  options: NonNullable<ParseArgsConfig['options']>,
): { values: ParsedValues; positionals: string[] } {
  try {
    const parsed = parseArgs({
      args: attachNegativeValues(argv, options),
      options,
      allowPositionals: true,
      strict: true,
    });
    return { values: parsed.values as ParsedValues, positionals: parsed.positionals };
  } catch (error) {
    throw new UsageError(parseErrorMessage(error));
  }
}

/** parseArgs's own messages, reworded to say what was expected and what arrived. */
function parseErrorMessage(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: string }).code;
  const option = /'(-{1,2}[^' ]+)/.exec(message)?.[1];
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) {
    return `Expected a known option, got \`${option}\` (a prompt that starts with - goes after --). See the command's --help`;
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option && /missing/.test(message)) {
    return `Expected a value after \`${option}\`, got nothing. See the command's --help`;
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option) {
    return `Expected \`${option}\` alone (it takes no value), got a value. See the command's --help`;
  }
  return message;
}

/**
 * `--ceiling -5` reads to parseArgs as a flag followed by an unknown flag `-5` ("argument is
 * ambiguous"). A value that looks like a negative number is attached (`--ceiling=-5`) so the
 * flag's own check can say what was expected. Nothing after `--` is touched.
 */
function attachNegativeValues(
  argv: string[],
  options: NonNullable<ParseArgsConfig['options']>,
): string[] {
  const out: string[] = [];
  for (let index = 0; index < argv.length; index++) {
    const token = argv[index]!;
    if (token === '--') {
      out.push(...argv.slice(index));
      break;
    }
    const next = argv[index + 1];
    const name = token.startsWith('--') ? token.slice(2) : undefined;
    if (
      name !== undefined &&
      options[name]?.type === 'string' &&
      next !== undefined &&
      /^-\.?\d/.test(next)
    ) {
      out.push(`${token}=${next}`);
      index++;
    } else out.push(token);
  }
  return out;
}

export function intFlag(
  values: ParsedValues,
  name: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (typeof raw !== 'string' || !/^\d+$/.test(raw.trim()) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `from ${min} and up` : `from ${min} to ${max}`;
    throw new UsageError(
      `Expected \`--${name}\` to be a whole number ${range}, got \`${String(raw)}\``,
    );
  }
  return value;
}

/**
 * A whole-number flag checked against the library option's field it sets, so the bounds (and
 * the words for them) are the option's own: `--max-steps` is `MAX_STEPS`.
 */
export function wholeNumberFlag(values: ParsedValues, field: Field<number>): number | undefined {
  const flag = field.flag;
  if (flag === undefined) throw new TypeError(`a field with no CLI flag: ${field.expected}`);
  const name = flag.slice(2);
  const raw = values[name];
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (typeof raw !== 'string' || !/^\d+$/.test(raw.trim()) || !accepts(field, value)) {
    throw new UsageError(`Expected \`${flag}\` to be ${field.expected}, got \`${String(raw)}\``);
  }
  return value;
}

export function durationFlag(values: ParsedValues, name: string): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  return parseDuration(String(raw), `--${name}`);
}

export function stringFlag(values: ParsedValues, name: string): string | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || raw.trim() === '') {
    throw new UsageError(`Expected \`--${name}\` to be a non-empty string, got \`${String(raw)}\``);
  }
  return raw;
}
