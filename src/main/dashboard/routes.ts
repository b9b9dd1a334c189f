import { readdirSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { redactSecrets } from '../../shared/redact.js';
import { foreignOrigin, sameToken, tokenOf } from './access.js';

/** The headers every answer carries. */
export const SAFE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'X-Frame-Options': 'DENY',
});

/** What the routes ask of the dashboard behind them. */
export interface DashboardApi {
  readonly token: string;
  /**
   * Whether a request's `Host` names this dashboard. On loopback only this machine's names
   * do: a page whose own name was made to point here (DNS rebinding) is refused.
   */
  hostAllowed(host: string | undefined): boolean;
  state(): unknown;
  /** Opens an event stream on `response`. */
  events(response: ServerResponse, headers: Record<string, string>): void;
  /**
   * The agent's row and, when `transcript` is set, its transcript (not read once `gone` says
   * the client went); undefined for an id the run does not know.
   */
  agent(id: string, transcript: boolean, gone: () => boolean): Promise<unknown | undefined>;
  /** Cancels the agent: the answer's status and body. */
  cancel(id: string): { status: number; body: unknown };
}

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** The page's files, read once: a name is served only if it is one of them. */
export function loadAssets(): Map<string, { type: string; body: Buffer }> {
  const folder = fileURLToPath(new URL('./assets/', import.meta.url));
  const assets = new Map<string, { type: string; body: Buffer }>();
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch {
    // A build without the page still serves the API; the page's route says what is missing.
    return assets;
  }
  for (const name of names) {
    const type = TYPES[path.extname(name)];
    if (type) assets.set(name, { type, body: readFileSync(path.join(folder, name)) });
  }
  return assets;
}

const AGENT_ROUTE = /^\/api\/agents\/([^/]+)(\/cancel)?$/;

/** Answers one request: the token first (401), then the route. */
export async function route(
  api: DashboardApi,
  assets: ReadonlyMap<string, { type: string; body: Buffer }>,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://dashboard');
  const method = request.method ?? 'GET';
  if (!api.hostAllowed(request.headers.host)) {
    return json(response, 403, {
      error: `Expected a request to this machine's dashboard, got one for host ${JSON.stringify(request.headers.host ?? '')}`,
    });
  }
  // A page of another origin never reaches a route that acts, token or not.
  if (method !== 'GET' && method !== 'HEAD' && foreignOrigin(request)) {
    return json(response, 403, {
      error: 'Expected a request from the dashboard page itself, got one from another origin',
    });
  }
  const { pathname } = url;
  const page = pathname === '/' || pathname === '/index.html';
  if (!sameToken(tokenOf(request, url), api.token)) {
    return json(response, 401, {
      error:
        'Expected the dashboard token (Authorization: Bearer TOKEN, or ?token=TOKEN), got none that matches',
    });
  }
  if (page) {
    if (!allow(method, 'GET', response)) return;
    const index = assets.get('index.html');
    if (!index) {
      return json(response, 404, { error: 'This cohort was built without the dashboard page' });
    }
    const body = index.body.toString('utf8').replaceAll('__TOKEN_PATH__', `/s/${api.token}`);
    return send(response, 200, index.type, body);
  }
  if (pathname.startsWith('/s/')) {
    if (!allow(method, 'GET', response)) return;
    const name = pathname.slice(pathname.indexOf('/', 3) + 1);
    const asset = /^[a-z0-9-]+\.[a-z]+$/.test(name) ? assets.get(name) : undefined;
    if (!asset || name === 'index.html') {
      return json(response, 404, {
        error: `Expected a file of the dashboard page, got ${JSON.stringify(name)}`,
      });
    }
    return send(response, 200, asset.type, asset.body);
  }
  if (pathname === '/api/state') {
    if (!allow(method, 'GET', response)) return;
    return json(response, 200, api.state());
  }
  if (pathname === '/api/events') {
    if (!allow(method, 'GET', response)) return;
    return api.events(response, { ...SAFE_HEADERS });
  }
  const agentRoute = AGENT_ROUTE.exec(pathname);
  if (agentRoute) {
    let id: string;
    try {
      id = decodeURIComponent(agentRoute[1]!);
    } catch {
      return json(response, 404, unknownAgent(agentRoute[1]!));
    }
    if (agentRoute[2]) {
      if (!allow(method, 'POST', response)) return;
      // The body is not read: a cancel takes no arguments.
      request.resume();
      const { status, body } = api.cancel(id);
      return json(response, status, body);
    }
    if (!allow(method, 'GET', response)) return;
    let gone = false;
    response.once('close', () => {
      gone = true;
    });
    const agent = await api.agent(id, method === 'GET', () => gone);
    if (agent === undefined) return json(response, 404, unknownAgent(id));
    return json(response, 200, agent);
  }
  return json(response, 404, {
    error: `Expected /, /api/state, /api/events or /api/agents/ID, got ${JSON.stringify(pathname)}`,
  });
}

export function unknownAgent(id: string): { error: string } {
  return { error: `Expected the id of an agent of this run, got ${JSON.stringify(id)}` };
}

/** False, with a 405 sent, when `method` is not the route's. */
function allow(method: string, allowed: 'GET' | 'POST', response: ServerResponse): boolean {
  if (method === allowed || (allowed === 'GET' && method === 'HEAD')) return true;
  response.setHeader('Allow', allowed === 'GET' ? 'GET, HEAD' : 'POST');
  json(response, 405, { error: `Expected ${allowed}, got ${method}` });
  return false;
}

export function json(response: ServerResponse, status: number, body: unknown): void {
  send(response, status, 'application/json; charset=utf-8', redactSecrets(JSON.stringify(body)));
}

function send(response: ServerResponse, status: number, type: string, body: string | Buffer): void {
  response.writeHead(status, {
    ...SAFE_HEADERS,
    'Content-Type': type,
    'Content-Length': Buffer.byteLength(body),
  });
  response.end(body);
}
