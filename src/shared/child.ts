import { AgentLog } from './agent-log.js';
import type { ChildSpec } from './child-spec.js';
import type { AgentEvent } from './events.js';
import { type ChildInbox, type LoopOutcome, runAgentLoop } from './loop/agent-loop.js';
import type { Provider } from './provider/provider.js';
import type { MessageParam } from './provider/types.js';
import { redactEvent, redactSecrets } from './redact.js';
import { clip, renderValue } from './render.js';
import { restoreTranscript } from './restore.js';
import { type AgentResult, emptyUsage } from './result.js';
import { loadToolModule } from './tools/modules.js';
import { DELIVERY_DISCIPLINE } from './tools/reply.js';
import type { AnyTool } from './tools/types.js';
import { WORKSPACE_TOOLS } from './tools/workspace.js';

export interface ChildRunDeps {
  provider: Provider;
  signal: AbortSignal;
  emit: (event: AgentEvent) => void;
  /** Tools supplied by the host side (host tools, the spawn family when depth allows). */
  extraTools?: readonly AnyTool[];
  /** Results of this child's own async agents. */
  inbox?: ChildInbox;
}

/** The tools a child may have, before its spec's `tools` selection. */
export async function childTools(
  spec: ChildSpec,
  extra: readonly AnyTool[] = [],
): Promise<Map<string, AnyTool>> {
  const all: AnyTool[] = [];
  if (spec.workspace) all.push(...WORKSPACE_TOOLS);
  for (const modulePath of spec.toolModules) all.push(...(await loadToolModule(modulePath)));
  all.push(...extra);
  const tools = new Map<string, AnyTool>();
  for (const tool of all) tools.set(tool.name, tool);
  if (spec.tools) {
    for (const name of [...tools.keys()]) if (!spec.tools.includes(name)) tools.delete(name);
  }
  return tools;
}

export function childSystemPrompt(system: string | undefined): string {
  return system && system.trim() !== ''
    ? `${system}\n\n${DELIVERY_DISCIPLINE}`
    : DELIVERY_DISCIPLINE;
}

/**
 * Runs one child agent to its single AgentResult. Never throws: whatever happens inside becomes
 * a `failed` result. The reply payload is held here, in child-owned state, and spilled whole to
 * the log before the result settles.
 */
export async function runChild(spec: ChildSpec, deps: ChildRunDeps): Promise<AgentResult> {
  const started = performance.now();
  const usage = emptyUsage();
  const log = new AgentLog(spec.logDir);
  const base = {
    id: spec.id,
    title: spec.title,
    logDir: spec.logDir,
    generation: spec.generation,
  };
  let result: AgentResult;
  try {
    const tools = await childTools(spec, deps.extraTools);
    const restored = spec.resume ? restoreTranscript(log.readTranscript() ?? '') : undefined;
    if (restored) {
      usage.steps = restored.steps;
      if (restored.ended) {
        result = settle(restored.ended, spec, log, base, usage, started);
        log.writeResult(result);
        return result;
      }
      log.rewriteTranscript(restored.messages);
    }
    const messages: MessageParam[] = restored?.messages ?? [{ role: 'user', content: spec.prompt }];
    log.writeMeta({
      id: spec.id,
      title: spec.title,
      depth: spec.depth,
      generation: spec.generation,
      model: spec.provider.model,
      baseURL: spec.provider.baseURL ?? null,
      maxSteps: spec.maxSteps,
      tools: [...tools.keys()],
      ...(restored ? { resumedAtStep: restored.steps } : {}),
    });
    if (!restored) log.appendTranscript(messages);
    const emit = (event: AgentEvent) => deps.emit(redactEvent(event));
    const agentId = spec.id;
    const live = spec.liveEvents !== false;
    const outcome = await runAgentLoop({
      agentId,
      depth: spec.depth,
      maxDepth: spec.maxDepth,
      system: childSystemPrompt(spec.system),
      messages,
      tools,
      provider: deps.provider,
      model: spec.provider.model,
      maxSteps: spec.maxSteps,
      signal: deps.signal,
      workspace: spec.workspace,
      usage,
      ...(restored ? { nudged: restored.nudged, resumeFrom: restored } : {}),
      ...(deps.inbox ? { inbox: deps.inbox } : {}),
      sink: {
        commit: (added) => log.appendTranscript(added),
        ...(spec.streamText
          ? { textDelta: (text: string) => emit({ type: 'text-delta', agentId, text }) }
          : {}),
        // Tool calls always go out: main needs to know who was inside a tool if the worker dies.
        // Without a listener they go slim, and the step and retry events not at all.
        toolCall: (call) =>
          emit({
            type: 'tool-call',
            agentId,
            callId: call.id,
            name: call.name,
            input: live ? call.input : undefined,
          }),
        toolResult: (call, block) =>
          emit({
            type: 'tool-result',
            agentId,
            callId: call.id,
            name: call.name,
            isError: block.is_error === true,
          }),
        ...(live
          ? {
              stepStart: (step: number) => emit({ type: 'step-start', agentId, step }),
              stepEnd: (step: number, stepUsage: { inputTokens: number; outputTokens: number }) =>
                emit({ type: 'step-end', agentId, step, usage: stepUsage }),
              providerRetry: (info: { attempt: number; waitMs: number; code: string }) =>
                emit({ type: 'provider-retry', agentId, ...info }),
            }
          : {}),
      },
    });
    result = settle(outcome, spec, log, base, usage, started);
  } catch (error) {
    const message = redactSecrets(error instanceof Error ? error.message : String(error));
    result = {
      ...base,
      outcome: 'failed',
      text: '',
      reason: `internal: ${message}`,
      truncated: false,
      elapsedMs: elapsed(started),
      usage,
    };
  }
  try {
    log.writeResult(result);
  } catch {
    // The result is still delivered; a log that cannot be written must not lose it.
  }
  return result;
}

function settle(
  outcome: LoopOutcome,
  spec: ChildSpec,
  log: AgentLog,
  base: Pick<AgentResult, 'id' | 'title' | 'logDir' | 'generation'>,
  usage: AgentResult['usage'],
  started: number,
): AgentResult {
  const common = { ...base, truncated: false, usage, text: '' };
  switch (outcome.kind) {
    case 'replied': {
      const rendered = outcome.replies.map(renderValue).filter((text) => text !== '');
      const full = rendered.join('\n\n');
      if (full === '') return { ...common, outcome: 'empty', elapsedMs: elapsed(started) };
      const only = outcome.replies.length === 1 ? outcome.replies[0] : undefined;
      const structured = typeof only === 'object' && only !== null;
      const replyFile = log.spillReply(full, structured);
      const clipped = clip(full, spec.replyCap);
      return {
        ...common,
        outcome: 'complete',
        text: redactSecrets(clipped.text),
        truncated: clipped.truncated,
        replyFile,
        elapsedMs: elapsed(started),
      };
    }
    case 'empty':
      return { ...common, outcome: 'empty', elapsedMs: elapsed(started) };
    case 'capped':
      return { ...common, outcome: 'capped', elapsedMs: elapsed(started) };
    case 'cancelled':
      return {
        ...common,
        outcome: 'cancelled',
        reason: outcome.reason,
        elapsedMs: elapsed(started),
      };
    case 'failed':
      return { ...common, outcome: 'failed', reason: outcome.reason, elapsedMs: elapsed(started) };
    case 'ready':
      // A child never ends ready: the loop nudges it instead. Kept total for the type.
      return { ...common, outcome: 'empty', elapsedMs: elapsed(started) };
  }
}

function elapsed(started: number): number {
  return Math.round(performance.now() - started);
}
