/**
 * One `transport` case, run inside a fresh measuring process (see engine-process.ts): raw calls
 * through one transport, no provider, no agent loop. Each call sends the first request of a
 * bench agent (the same system prompt, tools and prompt as the concurrency part's) and reads
 * the stream of events to its end, as `Provider` would before assembling the turn.
 */
import { childSystemPrompt } from '../../src/shared/child.js';
import { DEFAULT_PROVIDER_CONFIG, type ProviderConfig } from '../../src/shared/provider/config.js';
import {
  createTransport,
  type MessagesBody,
  type Transport,
} from '../../src/shared/provider/transport/index.js';
import { REPLY_DESCRIPTION, REPLY_SCHEMA } from '../../src/shared/tools/reply.js';
import { REPLY_TOOL } from '../../src/shared/tools/types.js';
import { runLimited } from '../common/limiter.js';
import { agentPrompt } from '../common/scenario.js';
import { spread } from '../common/stats.js';
import { tools as workTools } from '../common/work-tool.js';
import { EngineStartError } from '../engines/engines.js';
import type { TransportJob, TransportMeasurement } from '../engines/jobs.js';

/** What one call came to. */
type CallOutcome = { ok: true; events: number } | { ok: false; events: number; reason: string };

/** The first request of a two-step bench agent: the model answers with one `work` call. */
export function benchRequestBody(config: ProviderConfig): MessagesBody {
  return {
    model: config.model,
    max_tokens: config.maxTokens,
    system: childSystemPrompt(undefined),
    messages: [{ role: 'user', content: agentPrompt(0, { steps: 2, cpuMs: 0 }) }],
    tools: [
      ...workTools.map((tool) => ({
        name: tool.name,
        description: tool.description,
        input_schema: tool.inputSchema,
      })),
      { name: REPLY_TOOL, description: REPLY_DESCRIPTION, input_schema: REPLY_SCHEMA },
    ],
    stream: true,
  };
}

/** Sends one request and reads its events to the end. Never rejects. */
async function oneCall(transport: Transport, body: MessagesBody): Promise<CallOutcome> {
  // A controller per call, as Provider makes one per attempt.
  const controller = new AbortController();
  let events = 0;
  let last: string | undefined;
  try {
    const response = await transport.send(body, { signal: controller.signal, attempt: 0 });
    for await (const event of response.events) {
      events++;
      last = event.type;
    }
  } catch (error) {
    const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    return { ok: false, events, reason };
  }
  return last === 'message_stop'
    ? { ok: true, events }
    : {
        ok: false,
        events,
        reason: `Expected the stream to end with message_stop, got ${last ?? 'no event'}`,
      };
}

/** The warm-up: connections open, code hot. If no call gets through, the case cannot start. */
async function warmUp(transport: Transport, body: MessagesBody, job: TransportJob): Promise<void> {
  if (job.warmUp === 0) return;
  const { results } = await runLimited(job.warmUp, job.concurrency, () => oneCall(transport, body));
  const failure = results.find((outcome) => !outcome.ok);
  if (failure && results.every((outcome) => !outcome.ok)) {
    throw new EngineStartError(
      `the ${job.transport} transport got no call through in its warm-up: ${'reason' in failure ? failure.reason : ''}`,
    );
  }
}

export async function measureTransport(job: TransportJob): Promise<TransportMeasurement> {
  const config: ProviderConfig = {
    ...DEFAULT_PROVIDER_CONFIG,
    ...job.provider,
    transport: job.transport,
  };
  let transport: Transport;
  try {
    transport = createTransport(config);
  } catch (error) {
    throw new EngineStartError(`the ${job.transport} transport did not start: ${String(error)}`, {
      cause: error,
    });
  }
  const body = benchRequestBody(config);
  try {
    await warmUp(transport, body, job);
    const cpuBefore = process.cpuUsage();
    const run = await runLimited(job.calls, job.concurrency, () => oneCall(transport, body));
    const cpu = process.cpuUsage(cpuBefore);
    const reasons = new Set<string>();
    let completed = 0;
    let events = 0;
    for (const outcome of run.results) {
      events += outcome.events;
      if (outcome.ok) completed++;
      else if (reasons.size < 5) reasons.add(outcome.reason.slice(0, 200));
    }
    return {
      transport: job.transport,
      calls: job.calls,
      concurrency: job.concurrency,
      completed,
      failureReasons: [...reasons],
      events,
      makespanMs: run.makespanMs,
      latencyMs: spread(run.latenciesMs),
      processCpuMs: (cpu.user + cpu.system) / 1000,
    };
  } finally {
    await transport.close();
  }
}
