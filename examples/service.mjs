// docs/EMBEDDING.md's service, runnable: `npm run build && node examples/service.mjs`.
// One shared Engine; a group per job; results streamed as Server-Sent Events; a client that
// goes away cancels its job; a deadline per job; a host tool that knows whose job called it;
// each tenant's own API key; SIGTERM finishes what runs and exits.
import { createServer } from 'node:http';
import { Engine, UsageError } from 'cohort-agents';
import { startScriptedModel } from 'cohort-agents/testing';

// Offline unless a key is set: the scripted model answers like the API.
const model = process.env.ANTHROPIC_API_KEY ? undefined : await startScriptedModel();
// Each tenant's key, e.g. TENANT_KEYS='{"acme":"sk-ant-…"}'; a tenant not listed uses the
// environment's key.
const tenantKeys = JSON.parse(process.env.TENANT_KEYS ?? '{}');

/** A host tool: runs on the main thread, sees the job it works for as `context`. */
const customerOf = {
  name: 'customer_of',
  description: 'The customer record of the tenant this document belongs to.',
  inputSchema: { type: 'object', properties: {} },
  timeoutMs: 5_000, // a hung lookup becomes an is_error result after 5 s
  run: async (_input, { context, signal }) => {
    signal.throwIfAborted();
    console.log(`audit: job ${context.job} read the customer of ${context.tenant}`);
    return { tenant: context.tenant, plan: 'enterprise' };
  },
};

const engine = await Engine.start({
  hostTools: [customerOf],
  ...(model ? { provider: { baseURL: model.url, model: 'any' } } : {}),
  logs: 'failed', // keep the journal of failed agents only
});

let jobs = 0;

/** POST /jobs {"documents": [{"id", "text"}], "deadlineMs"?}: one agent per document. */
async function job(request, response) {
  let body;
  try {
    body = JSON.parse(await text(request));
    if (!Array.isArray(body.documents)) throw new Error('`documents` must be an array');
  } catch (error) {
    response.writeHead(400).end(`${error.message}\n`);
    return;
  }
  const id = ++jobs;
  const tenant = String(request.headers['x-tenant'] ?? 'default');
  const disconnected = new AbortController();
  response.on('close', () => {
    if (!response.writableFinished) disconnected.abort('client disconnected');
  });
  let group;
  try {
    group = engine.group({
      name: `job-${id}`,
      signal: disconnected.signal,
      ...(body.deadlineMs === undefined ? {} : { timeout: body.deadlineMs }),
      maxConcurrency: 50, // per job: one big job does not crowd out the others
      budget: { outputTokens: 200_000 },
      context: { tenant, job: id },
      ...(tenantKeys[tenant] ? { provider: { apiKey: tenantKeys[tenant] } } : {}),
    });
  } catch (error) {
    // A bad deadline is the caller's mistake; the engine names the option.
    response.writeHead(error instanceof UsageError ? 400 : 503).end(`${error.message}\n`);
    return;
  }
  response.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'close', // one job per connection: nothing idle holds a shutdown up
  });
  const specs = body.documents.map((document) => ({
    key: String(document.id),
    title: `document ${document.id}`,
    prompt: `Summarise this document for the customer (call customer_of first):\n\n${document.text}`,
  }));
  const outcomes = {};
  console.log(`job ${id} (${tenant}) started: ${specs.length} documents`);
  try {
    for await (const { spec, result } of group.map(specs, { concurrency: 50 })) {
      outcomes[result.outcome] = (outcomes[result.outcome] ?? 0) + 1;
      send(response, 'result', {
        document: spec.key,
        outcome: result.outcome,
        text: result.text,
        ...(result.cancelReason ? { cancelReason: result.cancelReason } : {}),
        ...(result.code ? { code: result.code } : {}),
      });
    }
  } catch (error) {
    // The engine drains (SIGTERM): what had started finished above; the rest is refused.
    send(response, 'error', { message: error.message });
  }
  const { agents, inputTokens, outputTokens } = group.totals;
  send(response, 'done', { job: id, agents, inputTokens, outputTokens });
  response.end();
  const why = group.cancelReason ? ` (${group.cancelReason})` : '';
  console.log(`job ${id} (${tenant}) ended: ${JSON.stringify(outcomes)}${why}`);
}

function send(response, event, data) {
  if (!response.writableEnded) response.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

async function text(request) {
  let body = '';
  for await (const chunk of request) body += chunk;
  return body;
}

const server = createServer((request, response) => {
  if (request.method === 'GET' && request.url === '/healthz') response.end('ok\n');
  else if (request.method === 'POST' && request.url === '/jobs') void job(request, response);
  else response.writeHead(404).end();
});
server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});

// SIGTERM: take no new connection, let running jobs finish, then stop the threads.
process.once('SIGTERM', async () => {
  server.close();
  await engine.drain();
  server.closeIdleConnections(); // health checks' keep-alive connections
  await engine.close();
  await model?.close();
  console.log('drained');
});
