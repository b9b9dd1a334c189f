import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { scriptBlock } from '../src/testing/index.js';
import type { ScriptStep } from '../src/testing/script.js';

// docs/EMBEDDING.md's service (examples/service.mjs), run as a user runs it: a process of its
// own on the built package, its embedded scripted model, and plain HTTP from here. The documents
// carry script blocks, so each agent does what the test needs (call the host tool, wait).

const SERVICE = fileURLToPath(new URL('../examples/service.mjs', import.meta.url));

interface Service {
  child: ChildProcess;
  port: number;
  /** Everything it printed on stdout so far. */
  output(): string;
  /** Resolves once stdout has a line matching `pattern`. */
  printed(pattern: RegExp): Promise<string>;
}

let service: Service | undefined;

afterEach(async () => {
  if (service && service.child.exitCode === null && service.child.signalCode === null) {
    service.child.kill('SIGKILL');
    await once(service.child, 'exit');
  }
  service = undefined;
});

async function startService(env: NodeJS.ProcessEnv = {}): Promise<Service> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, PORT: '0', ...env };
  delete childEnv.ANTHROPIC_API_KEY;
  delete childEnv.ANTHROPIC_BASE_URL;
  const child = spawn(process.execPath, [SERVICE], {
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const waiters: { pattern: RegExp; resolve(line: string): void }[] = [];
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    for (const waiter of [...waiters]) {
      const line = stdout.split('\n').find((each) => waiter.pattern.test(each));
      if (line === undefined) continue;
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(line);
    }
  });
  const printed = (pattern: RegExp) =>
    new Promise<string>((resolve, reject) => {
      const line = stdout.split('\n').find((each) => pattern.test(each));
      if (line !== undefined) resolve(line);
      else waiters.push({ pattern, resolve });
      child.once('exit', (code) =>
        reject(new Error(`the service exited (${code}) before printing ${pattern}: ${stderr}`)),
      );
    });
  const listening = await printed(/^listening on /);
  return {
    child,
    port: Number(/:(\d+)$/.exec(listening)![1]),
    output: () => stdout,
    printed,
  };
}

interface SseEvent {
  event: string;
  data: Record<string, unknown>;
}

/** Posts a job and reads its event stream; `onEvent` may end the request early. */
function postJob(
  port: number,
  body: unknown,
  options: { tenant?: string; onEvent?: (event: SseEvent, abort: () => void) => void } = {},
): Promise<{ status: number; events: SseEvent[]; body: string }> {
  return new Promise((resolve, reject) => {
    const events: SseEvent[] = [];
    let raw = '';
    const outgoing = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/jobs',
        headers: { 'content-type': 'application/json', 'x-tenant': options.tenant ?? 'acme' },
      },
      (response) => {
        let buffered = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          raw += chunk;
          buffered += chunk;
          let end = buffered.indexOf('\n\n');
          while (end !== -1) {
            const block = buffered.slice(0, end);
            buffered = buffered.slice(end + 2);
            const event = /^event: (.*)$/m.exec(block)?.[1];
            const data = /^data: (.*)$/m.exec(block)?.[1];
            if (event !== undefined && data !== undefined) {
              const parsed = { event, data: JSON.parse(data) as Record<string, unknown> };
              events.push(parsed);
              options.onEvent?.(parsed, () => {
                outgoing.destroy();
                resolve({ status: response.statusCode ?? 0, events, body: raw });
              });
            }
            end = buffered.indexOf('\n\n');
          }
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, events, body: raw }));
        response.on('error', () =>
          resolve({ status: response.statusCode ?? 0, events, body: raw }),
        );
      },
    );
    outgoing.on('error', (error) => {
      if (!outgoing.destroyed) reject(error);
    });
    outgoing.end(JSON.stringify(body));
  });
}

const documentScript = (steps: ScriptStep[]) => scriptBlock({ steps });

/** A document whose agent asks the host tool who it works for, then replies with that. */
const lookingUp = (id: number) => ({
  id,
  text: documentScript([
    { calls: [{ name: 'customer_of', input: {} }] },
    { reply: `document ${id} summarised` },
  ]),
});

/** A document whose agent waits `ms` in its model call before replying. */
const slow = (id: number, ms: number) => ({
  id,
  text: documentScript([{ delayMs: ms, reply: `document ${id} done` }]),
});

describe('the embedding example service', () => {
  it('runs a job: one agent per document, streamed, the host tool seeing its tenant', async () => {
    service = await startService();
    const job = await postJob(service.port, { documents: [1, 2, 3, 4, 5].map(lookingUp) });
    expect(job.status).toBe(200);
    const results = job.events.filter((event) => event.event === 'result');
    expect(results.map((event) => event.data.document).sort()).toEqual(['1', '2', '3', '4', '5']);
    expect(new Set(results.map((event) => event.data.outcome))).toEqual(new Set(['complete']));
    const done = job.events.at(-1)!;
    expect(done.event).toBe('done');
    expect(done.data.agents).toMatchObject({ spawned: 5, settled: 5, queued: 0, running: 0 });
    expect(Number(done.data.outputTokens)).toBeGreaterThan(0);
    await service.printed(/^job 1 \(acme\) ended: \{"complete":5\}$/);
    // Each agent's host tool call knew its job and tenant from the group's context.
    const audits = service.output().match(/^audit: .*$/gm) ?? [];
    expect(audits).toEqual(Array(5).fill('audit: job 1 read the customer of acme'));
    // The health check answers while a job runs.
    const health = await fetch(`http://127.0.0.1:${service.port}/healthz`);
    expect(await health.text()).toBe('ok\n');
  });

  it('cancels a job whose client goes away, with the reason the service gave', async () => {
    service = await startService();
    let seen = 0;
    // One quick document, then four that wait a minute: the client leaves after the first.
    const documents = [lookingUp(0), ...[1, 2, 3, 4].map((id) => slow(id, 60_000))];
    const job = await postJob(
      service.port,
      { documents },
      {
        onEvent: (event, abort) => {
          if (event.event === 'result' && ++seen === 1) abort();
        },
      },
    );
    expect(job.events[0]?.data).toMatchObject({ document: '0', outcome: 'complete' });
    const line = await service.printed(/^job 1 \(acme\) ended/);
    expect(line).toBe('job 1 (acme) ended: {"complete":1,"cancelled":4} (client disconnected)');
  });

  it('holds a job deadline: slow documents end cancelled with reason timeout', async () => {
    service = await startService();
    const documents = [lookingUp(0), slow(1, 60_000), slow(2, 60_000)];
    const job = await postJob(service.port, { documents, deadlineMs: 1500 });
    const byDocument = new Map(
      job.events
        .filter((event) => event.event === 'result')
        .map((event) => [event.data.document, event.data]),
    );
    expect(byDocument.get('0')).toMatchObject({ outcome: 'complete' });
    expect(byDocument.get('1')).toMatchObject({ outcome: 'cancelled', cancelReason: 'timeout' });
    expect(byDocument.get('2')).toMatchObject({ outcome: 'cancelled', cancelReason: 'timeout' });
  });

  it('refuses a bad deadline with the option named, and a body that is not a job', async () => {
    service = await startService();
    const zero = await postJob(service.port, { documents: [lookingUp(1)], deadlineMs: 0 });
    expect(zero.status).toBe(400);
    expect(zero.body).toMatch(/`group\.timeout`/);
    const garbage = await postJob(service.port, { docs: 3 });
    expect(garbage.status).toBe(400);
    expect(garbage.body).toMatch(/`documents` must be an array/);
  });

  it('on SIGTERM finishes the job that runs, then exits 0', async () => {
    service = await startService();
    const documents = [1, 2, 3].map((id) => slow(id, 1500));
    const job = postJob(service.port, { documents });
    // Its agents are spawned in the same turn as this line is printed: before the signal.
    await service.printed(/^job 1 \(acme\) started: 3 documents$/);
    service.child.kill('SIGTERM');
    const finished = await job;
    const outcomes = finished.events
      .filter((event) => event.event === 'result')
      .map((event) => event.data.outcome);
    expect(outcomes).toEqual(['complete', 'complete', 'complete']);
    const [code] = (await once(service.child, 'exit')) as [number | null];
    expect(code).toBe(0);
    expect(service.output()).toMatch(/drained\n$/);
  });
});
