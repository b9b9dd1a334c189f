import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { UsageError } from '../../shared/errors.js';
import type { ProviderUsage } from '../../shared/provider/types.js';
import { AgentBook } from './agent-book.js';
import {
  type DashboardOptions,
  type DashboardSettings,
  type DashboardTarget,
  dashboardSettings,
} from './dashboard-options.js';
import { EventStream } from './event-stream.js';
import { type DashboardApi, json, loadAssets, route, unknownAgent } from './routes.js';
import { RateSeries, SAMPLE_MS } from './series.js';
import { admittedCalls, deltaText, type StateSources, stateOf, summaryOf } from './state.js';
import { agentTranscript } from './transcript.js';

export type { DashboardOptions, DashboardTarget } from './dashboard-options.js';

/** The cancel reason a dashboard's cancel gives. */
export const DASHBOARD_CANCEL = 'dashboard';

/** A dashboard being served. */
export interface Dashboard {
  /** The page's address, token included: `http://127.0.0.1:PORT/?token=TOKEN`. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly token: string;
  /** Shows an agent that is not a spawned child (a session's root) as a row of the tree. */
  addRoot(root: { id: string; title: string; model?: string }): void;
  /** One step of a root's, as it ends. */
  rootStepped(id: string, usage: ProviderUsage): void;
  /** Sends the last delta and `end`, ends the streams and stops listening. */
  close(): Promise<void>;
}

/**
 * Serves the live dashboard of `target` (docs/DASHBOARD.md): the agent tree, the governor, the
 * rates, the failures, transcripts and cancel, on 127.0.0.1 behind a token. Throws a UsageError
 * for a bad option or a port that cannot be had.
 */
export async function serveDashboard(
  target: DashboardTarget,
  options: DashboardOptions = {},
): Promise<Dashboard> {
  const { port, host, ...settings } = dashboardSettings(target, options);
  const dashboard = new LiveDashboard(target, settings);
  await dashboard.listen(port, host);
  return dashboard;
}

class LiveDashboard implements Dashboard, DashboardApi {
  readonly token: string;
  readonly #sources: StateSources;
  readonly #target: DashboardTarget;
  readonly #stream = new EventStream();
  readonly #server: Server;
  readonly #assets = loadAssets();
  readonly #stopObserving: () => void;
  readonly #updateMs: number;
  readonly #sampler: NodeJS.Timeout;
  #ticker: NodeJS.Timeout | undefined;
  #lastSummary = '';
  #reading: Promise<unknown> = Promise.resolve();
  #address: AddressInfo | undefined;
  #closing: Promise<void> | undefined;

  constructor(target: DashboardTarget, settings: Omit<DashboardSettings, 'port' | 'host'>) {
    this.token = settings.token;
    this.#target = target;
    this.#updateMs = settings.updateMs;
    const book = new AgentBook(target.prices, settings.maxAgents);
    const now = Date.now();
    this.#sources = {
      book,
      series: new RateSeries(this.#counters(book), now),
      governor: () => target.governor,
      run: {
        command: settings.command,
        ...(target.logDir === undefined ? {} : { logDir: target.logDir }),
        startedAt: now,
        cancel: settings.cancel,
      },
    };
    this.#stopObserving = target.observe({
      spawned: (spawn) => book.spawned(spawn),
      ...(settings.steps ? { stepped: (id, usage) => book.stepped(id, usage) } : {}),
    });
    this.#sampler = setInterval(() => {
      this.#sources.series.sample(this.#counters(book), Date.now());
      // With nobody watching, what changed is news to no one: a first client gets a snapshot.
      if (this.#stream.size === 0) book.takeChanged();
    }, SAMPLE_MS);
    this.#sampler.unref();
    this.#server = createServer((request, response) => {
      route(this, this.#assets, request, response).catch((error: unknown) => {
        if (!response.headersSent) json(response, 500, { error: String(error) });
        else response.destroy();
      });
    });
  }

  #counters(book: AgentBook): { calls: number; inputTokens: number; outputTokens: number } {
    const calls = admittedCalls(this.#target.governor);
    return calls === undefined ? { ...book.counters } : { ...book.counters, calls };
  }

  listen(port: number, host: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const onError = (error: NodeJS.ErrnoException) => {
        this.#stopObserving();
        clearInterval(this.#sampler);
        this.#stream.close();
        reject(listenError(error, port, host));
      };
      this.#server.once('error', onError);
      this.#server.listen(port, host, () => {
        this.#server.off('error', onError);
        this.#address = this.#server.address() as AddressInfo;
        resolve();
      });
    });
  }

  hostAllowed(host: string | undefined): boolean {
    if (host === undefined) return false;
    const address = this.host;
    if (!(address.startsWith('127.') || address === '::1')) return true;
    const port = `:${this.port}`;
    return (
      host === `127.0.0.1${port}` ||
      host === `localhost${port}` ||
      host === `[::1]${port}` ||
      host === `${address}${port}`
    );
  }

  get host(): string {
    return this.#address?.address ?? '';
  }

  get port(): number {
    return this.#address?.port ?? 0;
  }

  get url(): string {
    const host = this.host.includes(':') ? `[${this.host}]` : this.host;
    return `http://${host}:${this.port}/?token=${this.token}`;
  }

  state(): unknown {
    this.#sources.book.refreshStatuses();
    return stateOf(this.#sources, Date.now());
  }

  events(response: ServerResponse, headers: Record<string, string>): void {
    if (response.req.method === 'HEAD') {
      response.writeHead(200, { ...headers, 'Content-Type': 'text/event-stream; charset=utf-8' });
      response.end();
      return;
    }
    // The first client's snapshot has every row: what changed before it is no news to it.
    if (this.#stream.size === 0) this.#sources.book.takeChanged();
    this.#stream.open(response, headers, this.state());
    this.#ticker ??= setInterval(() => this.#tick(), this.#updateMs);
  }

  /** One delta to every client, when anything changed; the pace stops while nobody watches. */
  #tick(): void {
    if (this.#stream.size === 0) {
      clearInterval(this.#ticker);
      this.#ticker = undefined;
      return;
    }
    this.#sendDelta();
  }

  #sendDelta(): void {
    const { book } = this.#sources;
    book.refreshStatuses();
    // Serialised once: to see whether it changed, and as the delta's own text.
    const summary = JSON.stringify(summaryOf(this.#sources));
    if (!book.changed && summary === this.#lastSummary) return;
    this.#lastSummary = summary;
    this.#stream.sendText('delta', deltaText(this.#sources, summary, Date.now()));
  }

  async agent(
    id: string,
    withTranscript: boolean,
    gone: () => boolean,
  ): Promise<unknown | undefined> {
    const row = this.#sources.book.row(id);
    if (!row) return undefined;
    const logDir = this.#target.logDir;
    if (!withTranscript || logDir === undefined) return { agent: row, transcript: null };
    // One read of the journal at a time: clicks that come faster wait their turn rather than
    // each scanning at once, and one whose client went in the meantime reads nothing.
    const read = this.#reading.then(() => (gone() ? null : agentTranscript(logDir, id)));
    this.#reading = read.then(
      () => undefined,
      () => undefined,
    );
    return { agent: row, transcript: await read };
  }

  cancel(id: string): { status: number; body: unknown } {
    const { book, run } = this.#sources;
    const row = book.row(id);
    if (!row) return { status: 404, body: unknownAgent(id) };
    if (!run.cancel) {
      return {
        status: 409,
        body: {
          error:
            'Expected a dashboard that may cancel, got one that only shows (a worker’s: cancel from the producer)',
        },
      };
    }
    const settled = () => ({
      status: 409,
      body: {
        error: `Expected an agent still running, got ${JSON.stringify(id)}, which has settled (${row.outcome ?? 'settling'})`,
      },
    });
    if (row.status === 'settled') return settled();
    const handle = book.handle(id);
    if (!handle) {
      return {
        status: 409,
        body: {
          error: `Expected a spawned agent, got ${JSON.stringify(id)}, which this dashboard only shows`,
        },
      };
    }
    if (!handle.cancel(DASHBOARD_CANCEL)) return settled();
    return { status: 202, body: { id, cancelled: true } };
  }

  addRoot(root: { id: string; title: string; model?: string }): void {
    this.#sources.book.addRoot(root);
  }

  rootStepped(id: string, usage: ProviderUsage): void {
    this.#sources.book.stepped(id, usage);
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#stopObserving();
      clearInterval(this.#sampler);
      clearInterval(this.#ticker);
      this.#sendDelta();
      this.#stream.close();
      // Streams ended and idle sockets closed; a client still reading its last events gets a
      // moment to take `end` before its socket is cut.
      await new Promise<void>((resolve) => {
        const cut = setTimeout(() => this.#server.closeAllConnections(), 1_000);
        cut.unref();
        this.#server.close(() => {
          clearTimeout(cut);
          resolve();
        });
        this.#server.closeIdleConnections();
      });
    })();
    return this.#closing;
  }
}

function listenError(error: NodeJS.ErrnoException, port: number, host: string): Error {
  if (error.code === 'EADDRINUSE') {
    return new UsageError(
      `Expected a free port for the dashboard, got ${port}, which is in use on ${host}`,
    );
  }
  if (error.code === 'EACCES') {
    return new UsageError(
      `Expected a port this process may listen on, got ${port} (ports under 1024 need privileges)`,
    );
  }
  if (error.code === 'EADDRNOTAVAIL' || error.code === 'ENOTFOUND') {
    return new UsageError(
      `Expected an address of this machine to listen on, got ${JSON.stringify(host)}`,
    );
  }
  return error;
}
