/**
 * The scripted model in a process of its own (`dist/src/testing/serve.js`), so that its CPU is
 * not the measured process's: the bench talks to it over loopback HTTP like to any provider.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { builtPath } from './paths.js';

export interface ModelProcess {
  /** Base URL, e.g. `http://127.0.0.1:40123`. */
  url: string;
  child: ChildProcess;
  /** Sends SIGTERM and waits for the process to exit. */
  stop(): Promise<void>;
}

/** Starts `serve.js --port 0 ...flags` and resolves once it printed its listening line. */
export async function startModelProcess(flags: string[] = []): Promise<ModelProcess> {
  const child = spawn(
    process.execPath,
    [builtPath('src/testing/serve.js'), '--port', '0', ...flags],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const exited = once(child, 'exit');
  const url = await new Promise<string>((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer): void => {
      buffered += chunk.toString('utf8');
      const newline = buffered.indexOf('\n');
      if (newline === -1) return;
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
      const match = /listening on (http:\/\/\S+)/.exec(buffered.slice(0, newline));
      if (match?.[1] === undefined)
        reject(new Error(`Unexpected first line from serve.js: ${buffered}`));
      else resolve(match[1]);
    };
    const onExit = (code: number | null): void =>
      reject(new Error(`serve.js exited with code ${code} before listening`));
    child.stdout?.on('data', onData);
    child.once('exit', onExit);
  });
  // Nothing more is read from stdout; keep the pipe drained so the server never blocks on it.
  child.stdout?.resume();
  return {
    url,
    child,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Flags of `serve.js` for a load model; zeros are left out (they are its defaults). */
export function loadFlags(load: {
  ttftMs?: number;
  tps?: number;
  rpm?: number;
  itpm?: number;
  otpm?: number;
  bucketSeconds?: number;
  acceleration?: number;
  overload?: number;
  jitter?: number;
}): string[] {
  const flags: string[] = [];
  const add = (flag: string, value: number | undefined): void => {
    if (value !== undefined && value !== 0) flags.push(flag, String(value));
  };
  add('--ttft-ms', load.ttftMs);
  add('--tps', load.tps);
  add('--rpm', load.rpm);
  add('--itpm', load.itpm);
  add('--otpm', load.otpm);
  // 60 is serve.js's default, so it is left out like the zeros.
  if (load.bucketSeconds !== 60) add('--bucket-seconds', load.bucketSeconds);
  add('--acceleration', load.acceleration);
  add('--overload', load.overload);
  add('--jitter', load.jitter);
  return flags;
}

/** CPU time (user + system) a process has used, in ms; undefined where /proc is missing. */
export function processCpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    // utime and stime are fields 14 and 15 of stat, in clock ticks (100 per second on Linux).
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}
