import { budgetFromData } from '../main/agents/load.js';
import type { AgentOptions } from '../main/engine.js';
import { AGENT_FIELDS, MAX_STEPS } from '../main/engine-options.js';
import type { Budget } from '../shared/budget.js';
import { describeValue, UsageError } from '../shared/errors.js';
import {
  accepts,
  anyString,
  custom,
  defined,
  type Field,
  type Fields,
  type OptionsOf,
  required,
} from '../shared/option-schema.js';

/**
 * The fields of a task line, in the order the batch help lists them. A line is checked for its
 * JSON types here; the engine's own check (`checkTasks`) then refuses what it would refuse at
 * spawn time (an empty title, an unknown tool), so the string fields only need to be strings.
 */
export const TASK_FIELDS = {
  id: required(
    custom<string>(
      'a non-empty string or an integer',
      (value) =>
        (typeof value === 'string' && value.trim() !== '') ||
        (typeof value === 'number' && Number.isSafeInteger(value)),
    ),
  ),
  prompt: AGENT_FIELDS.prompt,
  title: anyString(),
  system: anyString(),
  tools: AGENT_FIELDS.tools,
  maxSteps: MAX_STEPS,
  model: anyString(),
  /** A named agent (an agent file) whose fields are this task's defaults. */
  agent: anyString(),
  /** A JSON Schema the reply must match; the result line then carries `value`. */
  outputSchema: custom<Record<string, unknown>>(
    'a JSON Schema (an object)',
    (value) => typeof value === 'object' && value !== null && !Array.isArray(value),
  ),
  /** This task's limits (`time` as a duration, like agent files). */
  budget: custom<Budget>('a budget', (value, name) => {
    budgetFromData(value, `\`${name}\``);
    return true;
  }),
  /** How long one of its requests may keep being refused (429/529), in ms: over `--patience`. */
  patienceMs: AGENT_FIELDS.patienceMs,
  /** Its wall-clock limit in ms from its spawn: over its agent file's and `--timeout`. */
  timeout: AGENT_FIELDS.timeout,
  /** Prompt-cache breakpoints (`auto` or `off`): over its agent file's and `--cache`. */
  cache: AGENT_FIELDS.cache,
  /** Its shared prefix's cache lifetime (`5m` or `1h`): over its agent file's and `--cache-ttl`. */
  cacheTtl: AGENT_FIELDS.cacheTtl,
  /** Text its siblings share, sent before the prompt and cached apart (docs/CACHING.md). */
  preamble: AGENT_FIELDS.preamble,
  /** How its model calls are sent (`realtime`, `batches` or `auto`): over `--lane` (docs/LANES.md). */
  lane: AGENT_FIELDS.lane,
  /** When it must be done (an ISO date-time or epoch ms): over `--deadline`; steers `auto`. */
  deadline: AGENT_FIELDS.deadline,
} as const satisfies Fields;

/** One line of a tasks file (an integer `id` is read as its string). */
export type BatchTask = Omit<OptionsOf<typeof TASK_FIELDS>, 'id'> & { id: string };

/**
 * The order a bad line's problems are listed in, kept from before the schema so that a line
 * with several problems is reported in the same words.
 */
const PROBLEM_ORDER: readonly (keyof typeof TASK_FIELDS)[] = [
  'id',
  'prompt',
  'title',
  'system',
  'model',
  'agent',
  'tools',
  'maxSteps',
  'outputSchema',
  'budget',
  'patienceMs',
  'timeout',
  'cache',
  'cacheTtl',
  'preamble',
  'lane',
  'deadline',
];

export interface TaskLineError {
  /** 1-based line number. */
  line: number;
  message: string;
}

export interface ParsedTasks {
  tasks: BatchTask[];
  /** Bad lines, in line order. */
  errors: TaskLineError[];
  /** The 1-based line of each task in `tasks`, by id. */
  lineOf: ReadonlyMap<string, number>;
}

/**
 * Parses a tasks file: one JSON object per line; blank lines are skipped. Never throws: every bad
 * line (invalid JSON, missing or duplicate id, a field of the wrong type, an unknown field) is
 * reported with its line number and what was wrong, and the good lines are kept.
 */
export function parseTasks(text: string): ParsedTasks {
  const tasks: BatchTask[] = [];
  const errors: TaskLineError[] = [];
  const seen = new Map<string, number>();
  const lines = text.split('\n');
  lines.forEach((raw, index) => {
    const line = index + 1;
    const trimmed = raw.trim();
    if (trimmed === '') return;
    const checked = checkTaskLine(trimmed);
    if (!checked.ok) {
      errors.push({ line, message: checked.message });
      return;
    }
    const first = seen.get(checked.task.id);
    if (first !== undefined) {
      errors.push({
        line,
        message: `duplicate id \`${checked.task.id}\` (first on line ${first})`,
      });
      return;
    }
    seen.set(checked.task.id, line);
    tasks.push(checked.task);
  });
  return { tasks, errors, lineOf: seen };
}

/**
 * What the engine is asked to run for a task: the one mapping from a line to `AgentOptions`, so
 * the line is checked as exactly what will run. The title falls back to the task's id.
 */
export function taskAgentOptions(task: BatchTask): AgentOptions {
  return defined({
    prompt: task.prompt,
    title: task.title ?? task.id,
    streamText: false,
    system: task.system,
    tools: task.tools,
    maxSteps: task.maxSteps,
    model: task.model,
    agent: task.agent,
    outputSchema: task.outputSchema,
    budget: task.budget,
    patienceMs: task.patienceMs,
    timeout: task.timeout,
    cache: task.cache,
    cacheTtl: task.cacheTtl,
    preamble: task.preamble,
    lane: task.lane,
    deadline: task.deadline,
  });
}

/**
 * Runs a check on each good task before any task starts, most often the engine's own:
 * `(task) => check.checkAgent(taskAgentOptions(task))`. A task it refuses with a UsageError
 * leaves `tasks` and joins `errors` with its line number and the message (an empty title or
 * model, `maxSteps` out of bounds, an unknown tool), so the good lines can run and none is
 * refused halfway through a batch. Anything else it throws is a fault, and is thrown on.
 */
export function checkTasks(parsed: ParsedTasks, check: (task: BatchTask) => void): ParsedTasks {
  const tasks: BatchTask[] = [];
  const errors = [...parsed.errors];
  const lineOf = new Map(parsed.lineOf);
  for (const task of parsed.tasks) {
    try {
      check(task);
      tasks.push(task);
    } catch (error) {
      if (!(error instanceof UsageError)) throw error;
      errors.push({ line: parsed.lineOf.get(task.id) ?? 0, message: error.message });
      lineOf.delete(task.id);
    }
  }
  errors.sort((first, second) => first.line - second.line);
  return { tasks, errors, lineOf };
}

export function checkTaskLine(
  text: string,
): { ok: true; task: BatchTask } | { ok: false; message: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return {
      ok: false,
      message: `invalid JSON: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, message: `expected a JSON object, got ${describeValue(value, 60)}` };
  }
  const record = value as Record<string, unknown>;
  const problems: string[] = [];
  const unknown = Object.keys(record).filter((key) => !Object.hasOwn(TASK_FIELDS, key));
  if (unknown.length > 0) {
    problems.push(
      `unknown field(s) ${unknown.map((key) => `\`${key}\``).join(', ')}; expected only ${Object.keys(TASK_FIELDS).join(', ')}`,
    );
  }
  for (const key of PROBLEM_ORDER) {
    const field: Field = TASK_FIELDS[key];
    const item = record[key];
    if (item === undefined) {
      if (field.required) problems.push(`missing \`${key}\``);
      continue;
    }
    try {
      if (!accepts(field, item, key)) {
        problems.push(
          `expected \`${key}\` to be ${field.expected}, got ${describeValue(item, 60)}`,
        );
      }
    } catch (error) {
      // A field whose check words its own message (the budget).
      if (!(error instanceof UsageError)) throw error;
      problems.push(error.message.replace(/^Expected/, 'expected'));
    }
  }
  if (problems.length > 0) return { ok: false, message: problems.join('; ') };
  const budget =
    record.budget === undefined ? undefined : budgetFromData(record.budget, '`budget`');
  return {
    ok: true,
    task: {
      ...(record as Omit<BatchTask, 'id' | 'budget'>),
      id: String(record.id),
      ...defined({ budget }),
    },
  };
}
