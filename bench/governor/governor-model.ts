/**
 * The `governor` part's side of its model process (governor-model-process.ts): start it with
 * the rate limits of a case, ask it what it admitted, stop it. One fresh process per case, so
 * every case meets full buckets and its record holds only its own requests.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import type { ScriptedModelOptions } from '../../src/testing/index.js';
import { builtPath } from '../common/paths.js';
import type { ModelReport } from './governor-jobs.js';

export interface GovernorModel {
  /** Base URL, e.g. `http://127.0.0.1:40123`. */
  url: string;
  /** Every admission and 429 since it started, and its counters. */
  report(): Promise<ModelReport>;
  /** Closes the model and waits for its process to exit. */
  stop(): Promise<void>;
}

/** How long the process may take to exit once told to. */
const EXIT_GRACE_MS = 10_000;

/** Resolves with the next IPC message of `type`; rejects if the process exits first. */
function nextMessage<T>(child: ChildProcess, type: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: { type?: string }): void => {
      if (message.type !== type) return;
      child.off('exit', onExit);
      child.off('message', onMessage);
      resolve(message as T);
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
      child.off('message', onMessage);
      reject(new Error(`governor model process exited (${signal ?? code}) before its ${type}`));
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

export async function startGovernorModel(options: ScriptedModelOptions): Promise<GovernorModel> {
  const child = fork(builtPath('bench/governor/governor-model-process.js'), [], {
    // Not the parent's flags: under vitest they name its own loaders.
    execArgv: [],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const exited = once(child, 'exit');
  const listening = nextMessage<{ url: string }>(child, 'listening');
  child.send(options);
  const { url } = await listening;
  return {
    url,
    async report() {
      const answer = nextMessage<{ report: ModelReport }>(child, 'report');
      child.send({ type: 'report' });
      return (await answer).report;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const timer = setTimeout(() => child.kill('SIGKILL'), EXIT_GRACE_MS);
      if (child.connected) child.disconnect();
      await exited;
      clearTimeout(timer);
    },
  };
}
