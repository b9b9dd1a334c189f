import type { AgentEvent } from '../shared/events.js';
import type { AgentResult } from '../shared/result.js';
import {
  isStandardSchema,
  type StandardIssue,
  type StandardResult,
  type StandardSchema,
} from '../shared/standard-schema.js';
import { standardJsonSchema } from '../shared/tools/output-schema.js';
import type { AgentOptions } from './engine-options.js';
import type { ChildHandle } from './runners/spawned-child.js';

/**
 * Spawns a child whose `outputSchema` is a Standard Schema (zod, valibot, arktype); undefined
 * for any other spawn. The schema object crosses no thread (it is not structured-cloneable, and
 * the spec goes to workers and queues as it is): the child gets its JSON Schema, converted once
 * here, and replies are checked against that on its worker as for any typed reply. Its result's
 * `value` is then parsed here by the schema's own `validate`, awaited when it is async, so
 * transforms and defaults apply and `value` has the schema's output type. A value `validate`
 * refuses (a refinement no JSON Schema states) fails the child `bad_reply`. The child's own
 * `agent-settle` event carries the parsed result too: it comes once the parse is done, just
 * before `result` resolves.
 */
export function spawnStandard<T>(
  options: AgentOptions<T>,
  spawn: (options: AgentOptions) => ChildHandle,
): ChildHandle<T> | undefined {
  const schema = (options as AgentOptions<T> | undefined)?.outputSchema;
  if (!isStandardSchema(schema)) return undefined;
  const outputSchema = standardJsonSchema('outputSchema', schema);
  const listener = options.onEvent;
  let id: string | undefined;
  let settle: (AgentEvent & { type: 'agent-settle' }) | undefined;
  // The child's own settle is held and heard with the parsed result, before its caller's
  // `result` resolves. A settle during the spawn call itself (its signal had aborted) is a
  // cancel with nothing to parse: `id` is not known yet, and it goes by as it is.
  const onEvent =
    listener &&
    ((event: AgentEvent) => {
      if (event.type === 'agent-settle' && event.agentId === id) settle = event;
      else listener(event);
    });
  const handle = spawn({ ...options, outputSchema, onEvent });
  id = handle.id;
  const result = handle.result
    .then((raw) => parseResult(raw, schema))
    .then((parsed) => {
      if (listener && settle) hear(listener, { ...settle, result: parsed });
      return parsed;
    });
  return parsedHandle(handle, result);
}

/**
 * Calls the listener; what it throws is thrown again outside the result's chain, as the runner's
 * own call would have, so the result still never rejects.
 */
function hear(listener: (event: AgentEvent) => void, event: AgentEvent): void {
  try {
    listener(event);
  } catch (error) {
    queueMicrotask(() => {
      throw error;
    });
  }
}

/** `result` with its value parsed by `schema`, or failed `bad_reply` when the schema refuses it. */
async function parseResult<T>(
  result: AgentResult,
  schema: StandardSchema<unknown, T>,
): Promise<AgentResult<T>> {
  const validate = schema['~standard'].validate;
  // Only a complete typed reply has a value; a schema with only a JSON Schema (no `validate`)
  // has nothing more to say than the worker's check did.
  if (result.outcome !== 'complete' || !('value' in result) || typeof validate !== 'function') {
    return result as AgentResult<T>;
  }
  let verdict: StandardResult<T>;
  try {
    verdict = await validate(result.value);
  } catch (error) {
    return refused(
      result,
      `its \`validate\` threw: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  if (verdict.issues) return refused(result, `the schema refused it: ${issueText(verdict.issues)}`);
  return { ...result, value: verdict.value };
}

/** A complete result turned `failed` (`bad_reply`): like every failed result, with no text. */
function refused<T>(result: AgentResult, why: string): AgentResult<T> {
  const { value: _value, replyFile: _replyFile, budgetExceeded: _over, ...rest } = result;
  return {
    ...rest,
    outcome: 'failed',
    code: 'bad_reply',
    text: '',
    truncated: false,
    reason: `The reply matched the JSON Schema of \`outputSchema\`, but ${why}`,
  };
}

const MAX_ISSUES = 5;

/** The issues as one line: `/path: message; …`, the first few only. */
function issueText(issues: readonly StandardIssue[]): string {
  const shown = issues.slice(0, MAX_ISSUES).map((issue) => {
    const path = (issue.path ?? [])
      .map((segment) => String(typeof segment === 'object' ? segment.key : segment))
      .join('/');
    return path === '' ? issue.message : `/${path}: ${issue.message}`;
  });
  const more = issues.length - shown.length;
  return more > 0 ? `${shown.join('; ')} (and ${more} more)` : shown.join('; ');
}

/**
 * The handle its caller holds: the child's own, with the parsed result. It reads `running` until
 * the parse is done, so `settled` always means `result` has resolved.
 */
function parsedHandle<T>(handle: ChildHandle, result: Promise<AgentResult<T>>): ChildHandle<T> {
  let done = false;
  void result.then(() => {
    done = true;
  });
  return {
    id: handle.id,
    title: handle.title,
    spawnedAt: handle.spawnedAt,
    get status() {
      return handle.status === 'settled' && !done ? 'running' : handle.status;
    },
    result,
    cancel: (reason) => handle.cancel(reason),
  };
}
