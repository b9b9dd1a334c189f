/**
 * Entry of the `embed` part's service process: an HTTP service built on an engine as a backend
 * team would build it. `POST /jobs` with `{"docs": M}` runs one agent per document and answers
 * when all have settled; a client that goes away cancels its job; `GET /healthz` answers at
 * once. The engine is cohort at its defaults (one shared Engine, a group per job) or the
 * hand-written official-SDK loop (`sdk-loop`, every document of a job at once, as a user writes
 * `Promise.all`).
 *
 * Protocol (IPC): it takes `{engine, modelUrl}` as its first argument (JSON), answers
 * `{type: 'listening', port}`; `{type: 'probe-start'}` starts its main-thread probe and CPU
 * count, `{type: 'probe-stop'}` answers `{type: 'probe', figures}`. It exits when the channel
 * disconnects.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Engine } from '../../src/index.js';
import { builtPath } from '../common/paths.js';
import { MainThreadProbe } from '../common/probes.js';
import { agentPrompt } from '../common/scenario.js';
import { startEngine } from '../engines/engines.js';
import type { EmbedFigures, EmbedServiceConfig, JobAnswer } from './embed-jobs.js';

/** Each document's agent: one step calling the `work` tool (no CPU), then the reply. */
const SHAPE = { steps: 2, cpuMs: 0 } as const;

type RunJob = (docs: number, signal: AbortSignal) => Promise<JobAnswer>;

async function cohortJobs(
  config: EmbedServiceConfig,
): Promise<{ run: RunJob; close(): Promise<void> }> {
  const engine = await Engine.start({
    provider: { baseURL: config.modelUrl, model: 'cohort-scripted' },
    toolModules: [builtPath('bench/common/work-tool.js')],
    logDir: config.logDir,
  });
  let jobs = 0;
  return {
    run: async (docs, signal) => {
      const job = ++jobs;
      const group = engine.group({ name: `job ${job}`, signal });
      const outcomes: Record<string, number> = {};
      const runs = Array.from({ length: docs }, (_, index) =>
        group.run({ title: `job ${job} doc ${index}`, prompt: agentPrompt(index, SHAPE) }),
      );
      for (const result of await Promise.all(runs)) {
        outcomes[result.outcome] = (outcomes[result.outcome] ?? 0) + 1;
      }
      return { outcomes };
    },
    close: () => engine.close(),
  };
}

async function sdkLoopJobs(
  config: EmbedServiceConfig,
): Promise<{ run: RunJob; close(): Promise<void> }> {
  const engine = await startEngine('sdk-loop', {
    provider: { baseURL: config.modelUrl, model: 'cohort-scripted' },
    logDir: config.logDir,
    toolModules: [builtPath('bench/common/work-tool.js')],
    concurrency: 1000,
  });
  let jobs = 0;
  return {
    run: async (docs) => {
      const job = ++jobs;
      const outcomes: Record<string, number> = {};
      const runs = Array.from({ length: docs }, (_, index) =>
        engine.run({
          title: `job ${job} doc ${index}`,
          prompt: agentPrompt(index, SHAPE),
          maxSteps: 10,
        }),
      );
      for (const result of await Promise.all(runs)) {
        outcomes[result.outcome] = (outcomes[result.outcome] ?? 0) + 1;
      }
      return { outcomes };
    },
    close: () => engine.close(),
  };
}

async function readJson(request: IncomingMessage): Promise<unknown> {
  let body = '';
  for await (const chunk of request) body += chunk;
  return JSON.parse(body);
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '{}') as EmbedServiceConfig;
  const jobs = config.engine === 'cohort' ? await cohortJobs(config) : await sdkLoopJobs(config);
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    if (request.method === 'GET' && request.url === '/healthz') {
      response.end('ok');
      return;
    }
    if (request.method !== 'POST' || request.url !== '/jobs') {
      response.statusCode = 404;
      response.end();
      return;
    }
    // A client that disconnects cancels its job.
    const controller = new AbortController();
    response.on('close', () => {
      if (!response.writableFinished) controller.abort('client disconnected');
    });
    void (async () => {
      try {
        const { docs } = (await readJson(request)) as { docs: number };
        const answer = await jobs.run(docs, controller.signal);
        response.setHeader('content-type', 'application/json');
        response.end(JSON.stringify(answer));
      } catch (error) {
        response.statusCode = 500;
        response.end(error instanceof Error ? error.message : String(error));
      }
    })();
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const probe = new MainThreadProbe();
  let cpuAt = process.cpuUsage();
  process.on('message', (message: { type?: string }) => {
    if (message.type === 'probe-start') {
      cpuAt = process.cpuUsage();
      probe.start();
    } else if (message.type === 'probe-stop') {
      const cpu = process.cpuUsage(cpuAt);
      const figures: EmbedFigures = {
        ...probe.stop(),
        cpuMs: (cpu.user + cpu.system) / 1000,
      };
      process.send?.({ type: 'probe', figures });
    }
  });
  process.once('disconnect', () => {
    server.close();
    server.closeAllConnections();
    void jobs.close().then(() => process.exit(0));
  });
  process.send?.({ type: 'listening', port: (server.address() as AddressInfo).port });
}

void main().catch((error: unknown) => {
  process.stderr.write(`embed service: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
