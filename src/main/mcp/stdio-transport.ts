import { type ChildProcess, spawn } from 'node:child_process';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** How long a server is given to go after its stdin closes, then after SIGTERM. */
const GRACE_MS = 2_000;

/** What a stdio server is started with. */
export interface StdioServerLaunch {
  command: string;
  args?: string[] | undefined;
  /** Set beside the few variables the SDK passes on (`PATH`, `HOME`, …). */
  env?: Record<string, string> | undefined;
  cwd?: string | undefined;
  /** Each chunk the server writes on stderr. */
  onStderr(chunk: Buffer): void;
}

/**
 * The MCP stdio transport for a server cohort starts: newline-delimited JSON-RPC over the child's
 * stdin and stdout, as the SDK's `StdioClientTransport`, with two differences that SDK class
 * cannot be told. The server gets a process group of its own (on POSIX), so a Ctrl-C in the
 * terminal reaches cohort alone (whose first one cancels a turn, or drains a worker) and not
 * every server; cohort ends the group itself, on close and on its way out. And `close` resolves
 * only once the process has exited, however many times it is called.
 */
export class StdioServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly #launch: StdioServerLaunch;
  readonly #buffer = new ReadBuffer();
  #child: ChildProcess | undefined;
  #exited: Promise<void> | undefined;
  #closing: Promise<void> | undefined;

  constructor(launch: StdioServerLaunch) {
    this.#launch = launch;
  }

  /** The server's process id, once spawned. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  start(): Promise<void> {
    if (this.#child) throw new Error('the stdio transport was started already');
    const launch = this.#launch;
    const child = spawn(launch.command, launch.args ?? [], {
      env: { ...getDefaultEnvironment(), ...launch.env },
      stdio: ['pipe', 'pipe', 'pipe'],
      cwd: launch.cwd,
      // Its own process group (setsid): the terminal's SIGINT goes to cohort's group, not this.
      // On Windows this would open a console window instead, and there is no group to spare it.
      detached: process.platform !== 'win32',
      windowsHide: true,
    });
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once('close', () => resolve()));
    void this.#exited.then(() => this.onclose?.());
    child.stderr?.on('data', (chunk: Buffer) => launch.onStderr(chunk));
    child.stdout?.on('data', (chunk: Buffer) => {
      try {
        this.#buffer.append(chunk);
      } catch (error) {
        // A line past the buffer's 10 MB: what follows cannot be read in step.
        this.onerror?.(error as Error);
        void this.close();
        return;
      }
      for (;;) {
        let message: JSONRPCMessage | null;
        try {
          message = this.#buffer.readMessage();
        } catch (error) {
          this.onerror?.(error as Error);
          continue;
        }
        if (message === null) break;
        this.onmessage?.(message);
      }
    });
    child.stdin?.on('error', (error) => this.onerror?.(error));
    child.stdout?.on('error', (error) => this.onerror?.(error));
    return new Promise((resolve, reject) => {
      child.once('spawn', () => resolve());
      child.once('error', (error) => {
        reject(error);
        this.onerror?.(error);
      });
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.#child?.stdin;
    if (!stdin || this.#closing) return Promise.reject(new Error('Not connected'));
    return new Promise((resolve) => {
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once('drain', resolve);
    });
  }

  /** Its stdin is closed, then its group gets SIGTERM, then SIGKILL; resolves once it exited. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    const child = this.#child;
    const exited = this.#exited;
    if (!child || !exited) return;
    // A server that never spawned has nothing to end: Node emits 'close' after its 'error' too.
    if (child.pid === undefined) return void (await exited);
    const gone = (ms: number) =>
      Promise.race([
        exited.then(() => true),
        new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms).unref()),
      ]);
    child.stdin?.end();
    if (await gone(GRACE_MS)) return;
    signalServer(child.pid, 'SIGTERM');
    if (await gone(GRACE_MS)) return;
    signalServer(child.pid, 'SIGKILL');
    await exited;
  }
}

/**
 * Sends a signal to a server's process group (which it leads: it was started detached), or to
 * the process alone where there is none (Windows), or when the group is gone already.
 */
export function signalServer(pid: number, signal: NodeJS.Signals): void {
  if (process.platform !== 'win32') {
    try {
      process.kill(-pid, signal);
      return;
    } catch {
      // No group (any more): the process alone, below.
    }
  }
  try {
    process.kill(pid, signal);
  } catch {
    // Gone already.
  }
}
