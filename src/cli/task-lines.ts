import { budgetFromData } from '../main/agents/load.js';
import type { AgentOptions } from '../main/engine.js';
import { MAX_STEPS_LIMIT } from '../main/options.js';
import type { Budget } from '../shared/budget.js';
import { describeValue, UsageError } from '../shared/errors.js';

/** One line of a tasks file. */
export interface BatchTask {
  id: string;
  prompt: string;
  title?: string;
  system?: string;
  tools?: string[];
  maxSteps?: number;
  model?: string;
  /** A named agent (an agent file) whose fields are this task's defaults. */
  agent?: string;
  /** A JSON Schema the reply must match; the result line then carries `value`. */
  outputSchema?: Record<string, unknown>;
  /** This task's limits (`time` as a duration, like agent files). */
  budget?: Budget;
}

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

const FIELDS = new Set([
  'id',
  'prompt',
  'title',
  'system',
  'tools',
  'maxSteps',
  'model',
  'agent',
  'outputSchema',
  'budget',
]);

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
  return {
    prompt: task.prompt,
    title: task.title ?? task.id,
    streamText: false,
    ...(task.system === undefined ? {} : { system: task.system }),
    ...(task.tools === undefined ? {} : { tools: task.tools }),
    ...(task.maxSteps === undefined ? {} : { maxSteps: task.maxSteps }),
    ...(task.model === undefined ? {} : { model: task.model }),
    ...(task.agent === undefined ? {} : { agent: task.agent }),
    ...(task.outputSchema === undefined ? {} : { outputSchema: task.outputSchema }),
    ...(task.budget === undefined ? {} : { budget: task.budget }),
  };
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
  const unknown = Object.keys(record).filter((key) => !FIELDS.has(key));
  if (unknown.length > 0) {
    problems.push(
      `unknown field(s) ${unknown.map((key) => `\`${key}\``).join(', ')}; expected only ${[...FIELDS].join(', ')}`,
    );
  }
  let id: string | undefined;
  if (record.id === undefined) problems.push('missing `id`');
  else if (typeof record.id === 'string' && record.id.trim() !== '') id = record.id;
  else if (typeof record.id === 'number' && Number.isSafeInteger(record.id)) id = String(record.id);
  else
    problems.push(
      `expected \`id\` to be a non-empty string or an integer, got ${describeValue(record.id, 60)}`,
    );
  if (record.prompt === undefined) problems.push('missing `prompt`');
  else if (typeof record.prompt !== 'string' || record.prompt.trim() === '') {
    problems.push(
      `expected \`prompt\` to be a non-empty string, got ${describeValue(record.prompt, 60)}`,
    );
  }
  for (const key of ['title', 'system', 'model', 'agent'] as const) {
    if (record[key] !== undefined && typeof record[key] !== 'string') {
      problems.push(`expected \`${key}\` to be a string, got ${describeValue(record[key], 60)}`);
    }
  }
  if (
    record.tools !== undefined &&
    (!Array.isArray(record.tools) || record.tools.some((tool) => typeof tool !== 'string'))
  ) {
    problems.push(
      `expected \`tools\` to be an array of strings, got ${describeValue(record.tools, 60)}`,
    );
  }
  if (
    record.maxSteps !== undefined &&
    (typeof record.maxSteps !== 'number' ||
      !Number.isInteger(record.maxSteps) ||
      record.maxSteps < 1 ||
      record.maxSteps > MAX_STEPS_LIMIT)
  ) {
    problems.push(
      `expected \`maxSteps\` to be a whole number from 1 to ${MAX_STEPS_LIMIT}, got ${describeValue(record.maxSteps, 60)}`,
    );
  }
  if (
    record.outputSchema !== undefined &&
    (typeof record.outputSchema !== 'object' ||
      record.outputSchema === null ||
      Array.isArray(record.outputSchema))
  ) {
    problems.push(
      `expected \`outputSchema\` to be a JSON Schema (an object), got ${describeValue(record.outputSchema, 60)}`,
    );
  }
  let budget: Budget | undefined;
  if (record.budget !== undefined) {
    try {
      budget = budgetFromData(record.budget, '`budget`');
    } catch (error) {
      if (!(error instanceof UsageError)) throw error;
      problems.push(error.message.replace(/^Expected/, 'expected'));
    }
  }
  if (problems.length > 0 || id === undefined) return { ok: false, message: problems.join('; ') };
  return {
    ok: true,
    task: {
      id,
      prompt: record.prompt as string,
      ...(record.title === undefined ? {} : { title: record.title as string }),
      ...(record.system === undefined ? {} : { system: record.system as string }),
      ...(record.tools === undefined ? {} : { tools: record.tools as string[] }),
      ...(record.maxSteps === undefined ? {} : { maxSteps: record.maxSteps as number }),
      ...(record.model === undefined ? {} : { model: record.model as string }),
      ...(record.agent === undefined ? {} : { agent: record.agent as string }),
      ...(record.outputSchema === undefined
        ? {}
        : { outputSchema: record.outputSchema as Record<string, unknown> }),
      ...(budget === undefined ? {} : { budget }),
    },
  };
}
