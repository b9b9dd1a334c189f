import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { EngineCheck } from '../main/engine-check.js';
import { UsageError } from '../shared/errors.js';
import { type ParsedValues, stringFlag, wholeNumberFlag } from './flags.js';
import { readPrompt, readTasksInput } from './input.js';
import { logRootOf } from './logs/run-folders.js';
import { note, safeLabel, stdout } from './output.js';
import { parseTemplate } from './prompt-template.js';
import {
  AGENT_FLAG,
  DEFAULT_MAX_CONTENT,
  fileLines,
  MAX_CONTENT_FLAG,
  OUTPUT_SCHEMA_FLAG,
  PROMPT_FLAG,
  SYSTEM_FLAG,
} from './task-files.js';
import { type BatchTask, type ParsedTasks, parseTasks, taskAgentOptions } from './task-lines.js';

/** Where a batch's tasks come from: a tasks file (or stdin), or files matched by `--files`. */
export interface TaskSource {
  /** For messages: the tasks file, `stdin`, or the `--files` patterns. */
  readonly label: string;
  /** The TASKS.jsonl argument (`-` for stdin, and for `--files`, which has none). */
  readonly tasksArg: string;
  /** Where a bad task is, for its message: `tasks.jsonl:3`, or `file 3, docs/a.md`. */
  where(line: number): string;
  /** The tasks, parsed as task lines are; `check` is the engine's, for the flags' values. */
  read(check: EngineCheck): Promise<ParsedTasks>;
}

/** The flags that only mean something with `--files`. */
const FILES_ONLY = [PROMPT_FLAG, SYSTEM_FLAG, AGENT_FLAG, OUTPUT_SCHEMA_FLAG, MAX_CONTENT_FLAG];

/**
 * The source the arguments name: exactly one TASKS.jsonl, or `--files` (with `--prompt`), never
 * both. Everything that can be checked without the engine is checked here, before anything
 * waits on stdin: the template, the schema file.
 */
export async function taskSource(values: ParsedValues, positionals: string[]): Promise<TaskSource> {
  const patterns = values.files as string[] | undefined;
  if (patterns === undefined) {
    const stray = FILES_ONLY.find((flag) => values[(flag.flag as string).slice(2)] !== undefined);
    if (stray !== undefined) {
      throw new UsageError(`Expected \`--files GLOB\` with \`${stray.flag}\`, got no --files`);
    }
    if (positionals.length !== 1) {
      throw new UsageError(
        `Expected exactly one TASKS.jsonl argument (or \`-\` for stdin), or --files GLOB, got ${positionals.length} arguments`,
      );
    }
    return tasksFileSource(positionals[0] as string);
  }
  if (positionals.length > 0) {
    // An unquoted pattern: the shell matched it, handing its first match to --files and the rest
    // as arguments.
    const expanded = positionals.every((arg) => arg !== '-' && !arg.endsWith('.jsonl'));
    const hint = expanded
      ? ". If the shell expanded a pattern, put it in quotes so cohort matches it: --files 'docs/*.md'"
      : '';
    throw new UsageError(
      `Expected either a TASKS.jsonl argument or \`--files\`, got both (${safeLabel(positionals.join(' '))} and --files)${hint}`,
    );
  }
  for (const pattern of patterns) {
    if (pattern.trim() === '')
      throw new UsageError('Expected `--files` to be a glob, got an empty one');
  }
  const promptArg = stringFlag(values, PROMPT_FLAG);
  if (promptArg === undefined) {
    throw new UsageError(
      "Expected `--prompt TEMPLATE` with `--files`, got none (e.g. --prompt 'Summarise {path}: {content}')",
    );
  }
  const maxContent = wholeNumberFlag(values, MAX_CONTENT_FLAG) ?? DEFAULT_MAX_CONTENT;
  const system = stringFlag(values, SYSTEM_FLAG);
  const agent = stringFlag(values, AGENT_FLAG);
  const outputSchema = schemaFile(stringFlag(values, OUTPUT_SCHEMA_FLAG));
  const template = parseTemplate(await readPrompt(promptArg));
  if (template.uses.size === 0) {
    note(
      'cohort batch: warning: --prompt has no {path}, {name} or {content}: every task gets the same prompt',
    );
  }
  const cwd = process.cwd();
  const excluded = ownFiles(values);
  const label = `--files ${patterns.map((pattern) => `'${safeLabel(pattern)}'`).join(' ')}`;
  let paths: readonly string[] = [];
  return {
    label,
    tasksArg: '-',
    where: (line) => `file ${line}, ${safeLabel(paths[line - 1] ?? '?')}`,
    async read(check) {
      checkShared(check, { system, agent, outputSchema });
      const made = await fileLines({
        patterns,
        template,
        system,
        agent,
        outputSchema,
        maxContent,
        excluded,
        cwd,
      });
      paths = made.paths;
      // Parsed as the lines of a tasks file are: the same checks, the same ids, the same resume.
      const parsed = parseTasks(made.lines.join('\n'));
      const errors = [...parsed.errors, ...made.errors].sort((a, b) => a.line - b.line);
      return { ...parsed, errors };
    },
  };
}

function tasksFileSource(arg: string): TaskSource {
  const label = arg === '-' ? 'stdin' : safeLabel(arg);
  return {
    label,
    tasksArg: arg,
    where: (line) => `${label}:${line}`,
    read: async () => parseTasks(await readTasksInput(arg)),
  };
}

/** `--output-schema FILE`: a JSON object, read once; the engine's check then compiles it. */
function schemaFile(file: string | undefined): Record<string, unknown> | undefined {
  if (file === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new UsageError(
      `Expected \`--output-schema\` to be a readable JSON file holding a JSON Schema, got \`${safeLabel(file)}\`: ${why}`,
    );
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new UsageError(
      `Expected \`--output-schema\` to hold a JSON Schema (an object), got ${Array.isArray(value) ? 'an array' : String(value)} in \`${safeLabel(file)}\``,
    );
  }
  return value as Record<string, unknown>;
}

/**
 * `--system`, `--agent` and `--output-schema` go into every task: a value the engine refuses is
 * refused once, as the flag's mistake (exit 2), not once per file.
 */
function checkShared(
  check: EngineCheck,
  shared: {
    system?: string | undefined;
    agent?: string | undefined;
    outputSchema?: Record<string, unknown> | undefined;
  },
): void {
  if (shared.agent === undefined && shared.outputSchema === undefined) return;
  try {
    check.checkAgent(
      taskAgentOptions({
        id: '--files',
        prompt: 'a file',
        ...(shared.system === undefined ? {} : { system: shared.system }),
        ...(shared.agent === undefined ? {} : { agent: shared.agent }),
        ...(shared.outputSchema === undefined ? {} : { outputSchema: shared.outputSchema }),
      }),
    );
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    const flags = [
      shared.agent === undefined ? '' : '--agent',
      shared.outputSchema ? '--output-schema' : '',
    ]
      .filter((flag) => flag !== '')
      .join(' or ');
    throw new UsageError(`${flags}: ${error.message}`);
  }
}

/**
 * What cohort writes for this batch, which a glob such as `**` would otherwise take in on a rerun:
 * `--out` and the files beside it named after it (its lock, its journal list), `--trace-file`,
 * and the log root.
 */
function ownFiles(values: ParsedValues): (absolute: string) => boolean {
  const out = typeof values.out === 'string' ? path.resolve(values.out) : undefined;
  const trace =
    typeof values['trace-file'] === 'string' ? path.resolve(values['trace-file']) : undefined;
  const logRoot = logRootOf(values);
  return (file) =>
    (out !== undefined && (file === out || file.startsWith(`${out}.`))) ||
    file === trace ||
    file.startsWith(`${logRoot}${path.sep}`);
}

/** `--print-tasks` or `--estimate`: the batch runs nothing. Both at once is a usage error. */
export function dryRunOf(values: ParsedValues): boolean {
  const print = values['print-tasks'] === true;
  const estimate = values.estimate === true;
  if (print && estimate) {
    throw new UsageError('Expected either `--print-tasks` or `--estimate`, got both');
  }
  return print || estimate;
}

/**
 * `--print-tasks`: the checked tasks as JSONL on stdout, exactly what would run (a file of them
 * given back as TASKS.jsonl runs the same tasks under the same ids). Exit 1 when some were bad.
 */
export function printTasks(tasks: readonly BatchTask[], badLines: number): number {
  const out = stdout();
  for (const task of tasks) out.write(`${JSON.stringify(task)}\n`);
  return badLines > 0 ? 1 : 0;
}
