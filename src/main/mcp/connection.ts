import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { redactSecrets } from '../../shared/redact.js';
import {
  DEFAULT_MCP_CONCURRENCY,
  DEFAULT_MCP_START_TIMEOUT_MS,
  type McpServerConfig,
} from './config.js';
import { releaseProcess, trackProcess } from './reaper.js';
import { Slots } from './slots.js';
import { type ServerTransport, serverTransport } from './transport.js';

/** A call to a server that is not running: its message says so, naming the server. */
export class ServerDownError extends Error {}

/** The longest timer Node keeps: the engine's tool limit, not the SDK's, ends a call. */
const NO_SDK_TIMEOUT = 2 ** 31 - 1;
const FIRST_RESTART_MS = 100;
const LAST_RESTART_MS = 10_000;
/**
 * How long a server must stay up before its next death waits the first wait again. A server that
 * starts and then dies at once would otherwise be started every 0.1 s for ever; a call answered
 * resets the wait too.
 */
const STEADY_MS = 30_000;

/**
 * What the SDK's Streamable HTTP transport reports, through `onerror` alone, when the stream a
 * call's answer was to come on breaks (the server died, or the network went): the call is never
 * rejected by the SDK, so the connection counts as dead and its calls fail at once.
 */
function streamBroke(error: Error): boolean {
  return /^(SSE stream disconnected|Failed to reconnect|Maximum reconnection attempts)/.test(
    error.message,
  );
}

/** The client's name and version as servers see them in `initialize`. */
const CLIENT_INFO = { name: 'cohort', version: '1' };

/**
 * One MCP server: its official SDK client, the calls in flight on it (at most `maxConcurrency`),
 * and its life. A stdio server that dies after it started, or an HTTP server that no longer knows
 * its session, is started again with a growing wait (0.1 s doubling to 10 s, back to 0.1 s once it
 * answered a call or stayed up 30 s); until it is back, calls fail at once with a message naming it.
 */
export class McpConnection {
  readonly name: string;
  readonly #config: McpServerConfig;
  readonly #slots: Slots;
  #client: Client | undefined;
  #transport: ServerTransport | undefined;
  #state: 'new' | 'up' | 'down' | 'closed' = 'new';
  #restartMs = FIRST_RESTART_MS;
  #restartTimer: NodeJS.Timeout | undefined;
  #steadyTimer: NodeJS.Timeout | undefined;
  /** A start under way (the first, or a restart), and what `close` aborts it with. */
  #starting: Promise<unknown> | undefined;
  readonly #closer = new AbortController();
  /** The running server's process (stdio). */
  #pid: number | undefined;
  /** How many times it was started again after dying. */
  restarts = 0;

  constructor(name: string, config: McpServerConfig) {
    this.name = name;
    this.#config = config;
    this.#slots = new Slots(config.maxConcurrency ?? DEFAULT_MCP_CONCURRENCY);
  }

  get state(): 'new' | 'up' | 'down' | 'closed' {
    return this.#state;
  }

  /** The server's process id (stdio), while it runs. */
  get pid(): number | undefined {
    return this.#pid;
  }

  /** Calls holding a slot now. */
  get inFlight(): number {
    return this.#slots.inUse;
  }

  /**
   * Starts the server, initialises it and lists its tools. Rejects with a message naming the
   * server when it cannot start, exits, sends what is not JSON-RPC, or does not answer within
   * its `startTimeoutMs`; what it was started with is never in the message.
   */
  start(): Promise<Tool[]> {
    const starting = this.#start();
    this.#starting = starting;
    const settled = () => {
      if (this.#starting === starting) this.#starting = undefined;
    };
    starting.then(settled, settled);
    return starting;
  }

  async #start(): Promise<Tool[]> {
    if (this.#closer.signal.aborted) throw new Error('it was closed');
    const timeoutMs = this.#config.startTimeoutMs ?? DEFAULT_MCP_START_TIMEOUT_MS;
    const timeout = AbortSignal.timeout(timeoutMs);
    // `close` aborts a start under way, and waits for what it spawned to be ended.
    const signal = AbortSignal.any([timeout, this.#closer.signal]);
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    const transport = serverTransport(this.#config);
    const spawned: { pid?: number | undefined } = {};
    let failed: (error: Error) => void = () => {};
    const failure = new Promise<never>((_resolve, reject) => {
      failed = reject;
    });
    client.onerror = (error) =>
      failed(new Error(`it sent what is not a JSON-RPC message (${error.message})`));
    client.onclose = () => failed(new Error('it closed the connection'));
    try {
      const tools = await Promise.race([
        this.#listTools(client, transport, signal, spawned),
        failure,
      ]);
      if (this.#state === 'closed') throw new Error('it was closed while it started');
      this.#client = client;
      this.#transport = transport;
      this.#state = 'up';
      this.#pid = spawned.pid;
      this.#steadyTimer = setTimeout(() => this.#steady(), STEADY_MS);
      this.#steadyTimer.unref();
      client.onerror = (error) => {
        if (this.#config.type === 'http' && streamBroke(error)) this.#onDied(client);
      };
      client.onclose = () => this.#onDied(client);
      return tools;
    } catch (error) {
      await client.close().catch(() => {});
      if (spawned.pid !== undefined) releaseProcess(spawned.pid);
      const why = timeout.aborted
        ? `it did not answer \`initialize\` and \`tools/list\` within ${timeoutMs} ms`
        : (error as Error).message;
      const stderr = transport.stderrTail();
      throw new Error(redactSecrets(stderr ? `${why}; its stderr ended: ${stderr}` : why));
    } finally {
      failed = () => {};
    }
  }

  async #listTools(
    client: Client,
    transport: ServerTransport,
    signal: AbortSignal,
    /** Where the process id goes once it is spawned. */
    spawned: { pid?: number | undefined },
  ): Promise<Tool[]> {
    const connecting = client.connect(transport.transport, { signal, timeout: NO_SDK_TIMEOUT });
    // The process is spawned as `connect` begins: from now on it goes with this process, even
    // when this process is forced out before the server answers.
    spawned.pid = transport.pid();
    if (spawned.pid !== undefined) trackProcess(spawned.pid);
    await connecting;
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor }, {
        signal,
        timeout: NO_SDK_TIMEOUT,
      });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return tools;
  }

  /**
   * Calls one tool once a slot is free. `signal` aborting (the agent's cancel, its time limit)
   * makes the SDK send `notifications/cancelled` and rejects with its reason.
   */
  async call(
    tool: string,
    input: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<CallToolResult> {
    const release = await this.#slots.take(signal);
    try {
      const client = this.#client;
      if (this.#state !== 'up' || !client)
        throw new ServerDownError(
          `MCP server \`${this.name}\` is not running (${this.#state === 'closed' ? 'it was closed' : 'it stopped, and is being started again'})`,
        );
      // The SDK leaves its listener on the signal it is given: it gets one of its own per call,
      // linked to the caller's, which lets go when the call ends. A listener added to a signal
      // aborted already never fires: such a call is not sent at all.
      signal.throwIfAborted();
      const request = new AbortController();
      const onAbort = () => request.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        const result = (await client.callTool({ name: tool, arguments: input }, undefined, {
          signal: request.signal,
          timeout: NO_SDK_TIMEOUT,
        })) as CallToolResult;
        if (this.#client === client) this.#steady();
        return result;
      } catch (error) {
        // An HTTP server that forgot the session (it restarted) answers 404: the protocol has the
        // client start a new one, as for a stdio server that died.
        if (error instanceof StreamableHTTPError && error.code === 404) this.#onDied(client);
        throw error;
      } finally {
        signal.removeEventListener('abort', onAbort);
      }
    } finally {
      release();
    }
  }

  /**
   * The connection closed, or an HTTP server's stream broke, while this server was up: the calls
   * in flight on it are rejected (closing the client rejects every pending request, naming no
   * server; the tool adds its name), and it is started again after a wait.
   */
  #onDied(client: Client): void {
    if (this.#client !== client || this.#state !== 'up') return;
    this.#release();
    clearTimeout(this.#steadyTimer);
    this.#state = 'down';
    this.#client = undefined;
    // Closed already when its process died; an HTTP client's session is let go of here.
    void client.close().catch(() => {});
    this.#scheduleRestart();
  }

  #scheduleRestart(): void {
    const waitMs = this.#restartMs;
    this.#restartMs = Math.min(this.#restartMs * 2, LAST_RESTART_MS);
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = undefined;
      if (this.#state !== 'down') return;
      this.start().then(
        () => {
          this.restarts++;
        },
        () => {
          if (this.#state === 'down') this.#scheduleRestart();
        },
      );
    }, waitMs);
    // A dead server waiting to be started again keeps no process alive.
    this.#restartTimer.unref();
  }

  /**
   * Closes the connection: a stdio server gets its stdin closed, then SIGTERM, then SIGKILL. A
   * start under way (a restart) is aborted first, and what it spawned ended before this resolves.
   */
  async close(): Promise<void> {
    this.#state = 'closed';
    clearTimeout(this.#restartTimer);
    clearTimeout(this.#steadyTimer);
    this.#closer.abort(new Error('it was closed while it started'));
    await this.#starting?.catch(() => {});
    const client = this.#client;
    this.#client = undefined;
    await client?.close().catch(() => {});
    this.#release();
  }

  /** The wait before the next start of this server, should it die now. */
  get restartWaitMs(): number {
    return this.#restartMs;
  }

  /** It stayed up, or answered a call: its next death waits the first wait again. */
  #steady(): void {
    clearTimeout(this.#steadyTimer);
    this.#restartMs = FIRST_RESTART_MS;
  }

  #release(): void {
    if (this.#pid !== undefined) releaseProcess(this.#pid);
    this.#pid = undefined;
  }
}
