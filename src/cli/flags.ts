import { type ParseArgsConfig, parseArgs } from 'node:util';
import { parseDuration } from '../shared/duration.js';
import { UsageError } from '../shared/errors.js';
import { accepts, defined, type Field } from '../shared/option-schema.js';

/**
 * A flag as the CLI parses and lists it: the field of a library option that it sets (its `flag`,
 * `arg` and `help`), or a flag of the CLI's own declared the same way (`--provider`, `--json`).
 */
export type CliFlag = Pick<Field, 'flag' | 'arg' | 'help' | 'type'> & {
  /** A one-letter alias: `h` for `-h`. */
  readonly short?: string;
};

/**
 * One entry of a help list: a flag with its own help, or flags that share one help (`--rpm N,
 * --itpm N, --otpm N`), or one flag a command describes in words of its own.
 */
export type HelpRow = CliFlag | { readonly flags: readonly CliFlag[]; readonly help: string };

export type ParseOptions = NonNullable<ParseArgsConfig['options']>;

/** `-h, --help`, which every command takes. */
export const HELP_FLAG: CliFlag = { flag: '--help', short: 'h', help: 'this help' };

/** The flag itself (`--max-steps`); a field without one is a mistake of the caller. */
export function flagOf(flag: CliFlag): string {
  if (flag.flag === undefined) throw new TypeError(`a field with no CLI flag: ${flag.help ?? ''}`);
  return flag.flag;
}

function rowFlags(row: HelpRow): readonly CliFlag[] {
  return 'flags' in row ? row.flags : [row];
}

/**
 * The parseArgs table of the flags of `rows`: a flag with a value is a string (repeatable when
 * it sets an array), one without is a switch.
 */
export function parseOptions(rows: readonly HelpRow[]): ParseOptions {
  const options: ParseOptions = {};
  for (const flag of rows.flatMap(rowFlags)) {
    options[flagOf(flag).slice(2)] = defined({
      type: flag.arg === undefined ? ('boolean' as const) : ('string' as const),
      multiple: flag.type === 'array' || undefined,
      short: flag.short,
    });
  }
  return options;
}

/**
 * The help lines of `rows`: two spaces, the flags with their values, padded to `width`, then
 * the help; its further lines, and the help of flags too long to leave room, start at that
 * column.
 */
export function helpLines(rows: readonly HelpRow[], width: number): string {
  const indent = ' '.repeat(width + 2);
  return rows
    .map((row) => {
      const flags = rowFlags(row)
        .map((flag) => {
          const name = flag.short === undefined ? flagOf(flag) : `-${flag.short}, ${flagOf(flag)}`;
          return flag.arg === undefined ? name : `${name} ${flag.arg}`;
        })
        .join(', ');
      const help = row.help;
      if (help === undefined) throw new TypeError(`a flag with no help: ${flags}`);
      const [first, ...more] = help.split('\n');
      const head =
        flags.length < width ? `  ${flags.padEnd(width)}${first}` : `  ${flags}\n${indent}${first}`;
      return [head, ...more.map((line) => `${indent}${line}`)].join('\n');
    })
    .join('\n');
}

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

/** A whole number within bounds, for flags of no library option (the benchmarks' own). */
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

/** A flag's parseArgs name (`max-steps`), given as that name or as the field it sets. */
function nameOf(flag: string | CliFlag): string {
  return typeof flag === 'string' ? flag : flagOf(flag).slice(2);
}

/**
 * A whole-number flag checked against the library option's field it sets, so the bounds (and
 * the words for them) are the option's own: `--max-steps` is `MAX_STEPS`. A number past the
 * safe integers is refused whatever the field allows: it would not be the number typed.
 */
export function wholeNumberFlag(values: ParsedValues, field: Field<number>): number | undefined {
  const flag = flagOf(field);
  const raw = values[flag.slice(2)];
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (
    typeof raw !== 'string' ||
    !/^\d+$/.test(raw.trim()) ||
    !Number.isSafeInteger(value) ||
    !accepts(field, value)
  ) {
    throw new UsageError(`Expected \`${flag}\` to be ${field.expected}, got \`${String(raw)}\``);
  }
  return value;
}

/** A flag that is one of a few words (`--transport undici|sdk`), as its field lists them. */
export function choiceFlag<T extends string>(values: ParsedValues, field: Field<T>): T | undefined {
  const flag = flagOf(field);
  const raw = values[flag.slice(2)];
  if (raw === undefined) return undefined;
  if (!accepts(field, raw)) {
    throw new UsageError(`Expected \`${flag}\` to be ${field.expected}, got \`${String(raw)}\``);
  }
  return raw as T;
}

export function durationFlag(values: ParsedValues, flag: string | CliFlag): number | undefined {
  const name = nameOf(flag);
  const raw = values[name];
  if (raw === undefined) return undefined;
  return parseDuration(String(raw), `--${name}`);
}

/** A duration flag that refuses 0: a limit, a window or a poll of nothing is never what is meant. */
export function positiveDurationFlag(
  values: ParsedValues,
  flag: string | CliFlag,
): number | undefined {
  const ms = durationFlag(values, flag);
  if (ms === 0) {
    const name = nameOf(flag);
    throw new UsageError(
      `Expected \`--${name}\` to be a duration above 0 like 30s, 10m or a number of milliseconds, got \`${String(values[name])}\``,
    );
  }
  return ms;
}

export function stringFlag(values: ParsedValues, flag: string | CliFlag): string | undefined {
  const name = nameOf(flag);
  const raw = values[name];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || raw.trim() === '') {
    throw new UsageError(`Expected \`--${name}\` to be a non-empty string, got \`${String(raw)}\``);
  }
  return raw;
}
