import { createHash } from 'node:crypto';
import type { AgentDefinition } from '../main/agents/definition.js';
import type { AgentOptions } from '../main/engine-options.js';
import type { Budget } from '../shared/budget.js';
import { mergeBudgets } from '../shared/budget-meter.js';
import { DEFAULT_MAX_STEPS } from '../shared/child-spec.js';
import { defined } from '../shared/option-schema.js';
import { DEFAULT_PROVIDER_CONFIG } from '../shared/provider/config.js';
import type { PreparedEngine } from './commands/start.js';
import { type BatchTask, taskAgentOptions } from './task-lines.js';

/**
 * A batch task's identity: a hash of the task as it runs, written on its result line as
 * `"taskHash": "sha256:<64 hex>"`, so that a rerun of the batch can tell a task that is the one
 * that ran from a task that only kept its id (a second week's tasks file with new prompts).
 *
 * What is in it is what decides the answer, after the task's agent file and the flags have
 * filled in what the line leaves unset, as the engine would run it:
 * - `prompt`, `preamble` and `system` (the agent file's body when the line has none);
 * - `model` (the line's, else its agent file's, else `--model`, else the provider's default);
 * - `tools` (the line's, else its agent file's, else every tool a task may name: `--tools`
 *   modules, the workspace tools, the agent tools under `--max-depth`);
 * - `maxSteps` (default 50), `outputSchema`, `budget` (merged over `--budget`, as the engine
 *   merges it) and `--max-tokens` (a reply's length limit);
 * - the name of the agent file it names; that file's fields enter through the ones above, so
 *   editing the file's body, model, tools, steps, schema or budget changes the hash.
 *
 * What is not in it does not change what the task asks or of whom: its `id` (the key the hash is
 * compared under), `title` (a label for people, never sent), `patienceMs` and `timeout` (how long
 * it may wait, not what it asks), `cache`, `cacheTtl` and `lane` (caching and batches change the bill, not
 * the reply), where requests go (`--base-url`, `--provider`, the governor's flags), the code of
 * the tools, the workspace's files and the other agent files (what the task reads or may spawn,
 * not the task itself).
 *
 * The hash is of canonical JSON (object keys sorted, unset fields left out), so the order of the
 * keys on a task line, or in an agent file's schema, does not change it.
 */

/** How every hash this version writes begins; a line with another is treated as one without. */
export const TASK_HASH_PREFIX = 'sha256:';

/** What the flags give a task that neither its line nor its agent file sets. */
export interface TaskDefaults {
  /** `--model`, else the provider's default. */
  model: string;
  /** `--max-tokens`, else the provider's default. */
  maxTokens: number;
  /** `--budget`: the limits each task's own are merged over. */
  budget?: Budget | undefined;
  /** Every tool a task may name: what one that names none gets. */
  toolNames: readonly string[];
}

/** The defaults a batch's flags give its tasks, from the checked engine. */
function taskDefaults(prepared: PreparedEngine): TaskDefaults {
  const provider = { ...prepared.options.provider, ...prepared.choice.config };
  return {
    model: provider.model ?? DEFAULT_PROVIDER_CONFIG.model,
    maxTokens: provider.maxTokens ?? DEFAULT_PROVIDER_CONFIG.maxTokens,
    budget: prepared.options.budget,
    toolNames: prepared.check.toolNames,
  };
}

/**
 * The hash of a task (a line that passed `checkTasks`) as it runs: its options merged over the
 * agent file it names (the engine's own `resolve`), under the flags' `defaults`.
 */
function taskHash(
  resolved: { options: AgentOptions; definition?: AgentDefinition },
  defaults: TaskDefaults,
): string {
  const { options, definition } = resolved;
  const identity = defined({
    prompt: options.prompt,
    preamble: options.preamble,
    system: options.system,
    model: options.model ?? defaults.model,
    maxTokens: defaults.maxTokens,
    tools: options.tools ?? defaults.toolNames,
    maxSteps: options.maxSteps ?? DEFAULT_MAX_STEPS,
    outputSchema: options.outputSchema,
    budget: mergeBudgets(defaults.budget, options.budget),
    agent: definition?.name,
  });
  const digest = createHash('sha256').update(canonicalJson(identity)).digest('hex');
  return `${TASK_HASH_PREFIX}${digest}`;
}

/** Each task's hash by id, with its agent file as the engine's check resolves it. */
export function taskIdentities(
  tasks: readonly BatchTask[],
  prepared: PreparedEngine,
): TaskIdentities {
  const defaults = taskDefaults(prepared);
  return new TaskIdentities(
    tasks.map((task) => [
      task.id,
      taskHash(prepared.check.resolve(taskAgentOptions(task)), defaults),
    ]),
  );
}

/**
 * A batch's tasks' hashes, and the names made from them: the hash on each result line, the
 * journal key and the queue job's version, each for one task id of the batch.
 */
export class TaskIdentities {
  /** Each task's hash, by id: what a results file's lines are compared with. */
  readonly hashes: ReadonlyMap<string, string>;

  constructor(entries: Iterable<readonly [string, string]>) {
    this.hashes = new Map(entries);
  }

  hash(taskId: string): string {
    const hash = this.hashes.get(taskId);
    if (hash === undefined) throw new Error(`no task hash for task id ${JSON.stringify(taskId)}`);
    return hash;
  }

  /**
   * A short form of the hash for names that carry it beside the task id (its queue job id):
   * 12 hex digits, plenty to tell one version of a task from the next.
   */
  version(taskId: string): string {
    const hash = this.hash(taskId);
    return hash.slice(TASK_HASH_PREFIX.length, TASK_HASH_PREFIX.length + 12);
  }

  /**
   * The key a task's journal records carry (`meta.key`): its id and its version, so a rerun
   * goes on from a transcript only when the task is the one that wrote it.
   */
  journalKey(taskId: string): string {
    return `${taskId}@${this.version(taskId)}`;
  }
}

/**
 * JSON with every object's keys in sorted order and no whitespace; `undefined` fields are left
 * out, as `JSON.stringify` leaves them. Arrays keep their order: a tool list's order is sent.
 */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value))
    return `[${value.map((item) => canonicalJson(item ?? null)).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const record = value as Record<string, unknown>;
    const fields = Object.keys(record)
      .filter((key) => record[key] !== undefined)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`);
    return `{${fields.join(',')}}`;
  }
  return JSON.stringify(value);
}
