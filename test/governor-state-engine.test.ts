/**
 * The governor's state file (`governor.state`, `--governor-state`) through the real engine, the
 * built CLI and several real processes sharing one file. The store on its own is in
 * governor-state.test.ts.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { EngineOptions, EngineWarning } from '../src/main/engine.js';
import { Engine } from '../src/main/engine.js';
import {
  type ScriptedModel,
  type ScriptedModelOptions,
  startScriptedModel,
} from '../src/testing/index.js';
import { readResultLines, runCli, writeTasks } from './cli-helpers.js';
import { type Rig, startRig, tempDir } from './helpers.js';
import { startWorkers, stopWorkers } from './queue-helpers.js';
import { type RedisRig, redisMissing, startRedis } from './redis.js';

const STORE = fileURLToPath(new URL('../dist/src/main/governor-state.js', import.meta.url));

/** Under /proc no one, root included, makes a file, and Node's recursive mkdir would spin. */
const UNUSABLE = '/proc/cohort-no-such/governor-state.json';

const CORRUPT = '{"version":1,"keys":';

let rig: Rig | undefined;

afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

/** An engine on its own scripted model whose warnings are collected. */
async function open(
  options: EngineOptions,
  modelOptions: ScriptedModelOptions = {},
): Promise<{ rig: Rig; warnings: EngineWarning[] }> {
  const warnings: EngineWarning[] = [];
  rig = await startRig(
    { threads: 1, onWarning: (warning) => warnings.push(warning), ...options },
    modelOptions,
  );
  return { rig, warnings };
}

function corruptFile(): string {
  const file = path.join(tempDir('cohort-state-'), 'governor-state.json');
  writeFileSync(file, CORRUPT);
  return file;
}

/** Points the default state file into a fresh folder for `run`, as a user's cache would be. */
async function withCacheHome<T>(run: (cache: string) => Promise<T>): Promise<T> {
  const before = process.env.XDG_CACHE_HOME;
  const cache = tempDir('cohort-cache-');
  process.env.XDG_CACHE_HOME = cache;
  try {
    return await run(cache);
  } finally {
    process.env.XDG_CACHE_HOME = before;
  }
}

describe('the engine and its governor state file', () => {
  it.runIf(process.platform === 'linux')(
    'an unwritable path: one warning, and agents still run',
    async () => {
      const { rig, warnings } = await open({ governor: { state: UNUSABLE } });
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ code: 'governor_state' });
      expect(warnings[0]!.message).toContain(UNUSABLE);
      expect(warnings[0]!.message).toMatch(/to be writable, got ENOENT.*the run goes on/);
      const results = await Promise.all(
        [1, 2, 3].map((index) => rig.engine.run({ prompt: `Task ${index}.` })),
      );
      expect(results.map((result) => result.outcome)).toEqual(['complete', 'complete', 'complete']);
      await rig.engine.close();
      expect(warnings).toHaveLength(1);
    },
  );

  it('a corrupt file: one warning at start, and rewritten when the engine closes', async () => {
    const file = corruptFile();
    const { rig, warnings } = await open({ governor: { state: file } });
    expect(warnings.map((warning) => warning.message)).toEqual([
      expect.stringMatching(/governor state file .* to hold .* got text that is not JSON/),
    ]);
    expect((await rig.engine.run({ prompt: 'One task.' })).outcome).toBe('complete');
    await rig.engine.close();
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ version: 1 });
    expect(warnings).toHaveLength(1);
  });

  it('by default the file is in the user’s cache folder; `false` and a governor off leave it alone', async () => {
    await withCacheHome(async (cache) => {
      const file = path.join(cache, 'cohort', 'governor-state.json');
      mkdirSync(path.dirname(file));
      writeFileSync(file, CORRUPT);
      for (const governor of [{ state: false as const }, { enabled: false, state: file }]) {
        const { rig, warnings } = await open({ governor });
        await rig.close();
        expect(warnings, JSON.stringify(governor)).toEqual([]);
        expect(readFileSync(file, 'utf8')).toBe(CORRUPT);
      }
      const { rig, warnings } = await open({});
      await rig.close();
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.message).toContain(file);
      expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ version: 1, keys: {} });
    });
  });

  it('without `onWarning`, a warning is a process warning with its code', async () => {
    const seen: Error[] = [];
    const listener = (warning: Error) => seen.push(warning);
    process.on('warning', listener);
    try {
      rig = await startRig({ threads: 1, governor: { state: corruptFile() } });
      // Node emits process warnings on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', listener);
    }
    const ours = seen.filter((warning) => warning.name === 'CohortWarning');
    expect(ours).toHaveLength(1);
    expect(ours[0]).toMatchObject({ code: 'governor_state' });
  });

  it('a second engine starts from what the first one learned, not from the slow start', async () => {
    const file = path.join(tempDir('cohort-state-'), 'governor-state.json');
    // Rate limits the headers report, so the key learns them; each engine on the same model,
    // base URL and key, as a second run of the same command would be.
    const { rig: first } = await open({ governor: { state: file } }, { rpm: 60_000 });
    await Promise.all(
      Array.from({ length: 40 }, (_, index) => first.engine.run({ prompt: `Task ${index}.` })),
    );
    await first.engine.close();
    const entries = Object.values(JSON.parse(readFileSync(file, 'utf8')).keys) as {
      window: number;
      rpm?: number;
    }[];
    expect(entries).toHaveLength(1);
    expect(entries[0]!.rpm).toBe(60_000);
    expect(entries[0]!.window).toBeGreaterThan(4);

    const second = await Engine.start({
      threads: 1,
      logDir: tempDir('cohort-logs-'),
      governor: { state: file },
      provider: { baseURL: first.model.url, model: 'cohort-scripted' },
    });
    try {
      // The key's state when the server gets its first request: before any response.
      const atFirst = new Promise<number | undefined>((resolve) =>
        first.model.once('request', () => resolve(second.governor!.states()[0]?.limit)),
      );
      expect((await second.run({ prompt: 'Again.' })).outcome).toBe('complete');
      expect(await atFirst).toBe(entries[0]!.window);
      expect(second.governor!.states()[0]!.requests).toMatchObject({ limit: 60_000 });
    } finally {
      await second.close();
    }
  });
});

describe('several processes on one state file', () => {
  it('each adds its keys: none is lost to another’s write, all closing at once', async () => {
    const file = path.join(tempDir('cohort-state-'), 'shared', 'governor-state.json');
    const processes = 4;
    const keysEach = 25;
    // Each process opens the store, waits for the word on stdin (so they write together), then
    // remembers its keys with a save after each and closes.
    const script = `
      import { GovernorStateFile } from ${JSON.stringify(STORE)};
      const [file, name, count] = process.argv.slice(1);
      const store = new GovernorStateFile({ path: file, onWarning: (m) => console.error(m) });
      process.stdin.once('data', async () => {
        for (let index = 0; index < Number(count); index++) {
          store.remember(name + ' key ' + index, { window: index + 1 });
          await store.flush();
        }
        await store.close();
        process.stdout.write('done');
      });
      process.stdout.write('ready');
    `;
    const children = Array.from({ length: processes }, (_, index) =>
      spawn(
        process.execPath,
        ['--input-type=module', '-e', script, file, `p${index}`, `${keysEach}`],
        {
          stdio: ['pipe', 'pipe', 'pipe'],
        },
      ),
    );
    const outputs = children.map((child) => {
      let opened = () => {};
      const ready = new Promise<void>((resolve) => {
        opened = resolve;
      });
      const output = { out: '', err: '', ready };
      child.stdout.on('data', (chunk: Buffer) => {
        output.out += chunk.toString();
        if (output.out.startsWith('ready')) opened();
      });
      child.stderr.on('data', (chunk: Buffer) => {
        output.err += chunk.toString();
      });
      return output;
    });
    const exits = children.map(
      (child) => new Promise<number | null>((resolve) => child.on('close', resolve)),
    );
    // Every store is open before any writes: they all start from the same (missing) file.
    await Promise.all(outputs.map((output) => output.ready));
    for (const child of children) child.stdin.end('go');
    expect(await Promise.all(exits)).toEqual(Array(processes).fill(0));
    expect(outputs.map((output) => output.err)).toEqual(Array(processes).fill(''));
    expect(outputs.map((output) => output.out)).toEqual(Array(processes).fill('readydone'));
    const { GovernorStateFile } = await import('../src/main/governor-state.js');
    const reader = new GovernorStateFile({ path: file, onWarning: () => {} });
    const missing: string[] = [];
    for (let index = 0; index < processes; index++) {
      for (let key = 0; key < keysEach; key++) {
        const recalled = reader.recall(`p${index} key ${key}`);
        if (recalled?.window !== key + 1) missing.push(`p${index} key ${key}`);
      }
    }
    expect(missing).toEqual([]);
    expect(existsSync(`${file}.lock`)).toBe(false);
  });
});

describe('cohort batch --governor-state', () => {
  let model: ScriptedModel;

  beforeAll(async () => {
    model = await startScriptedModel({ port: 0 });
  });

  afterAll(async () => {
    await model.close();
  });

  function batch(extra: string[]) {
    const tasks = writeTasks(4);
    const out = path.join(tempDir(), 'results.jsonl');
    const run = runCli(['batch', tasks, '--out', out, '--base-url', model.url, ...extra]);
    return { run, out };
  }

  it('a corrupt file at PATH: one warning naming the flag, the batch completes, the file is rewritten', async () => {
    const file = corruptFile();
    const { run, out } = batch(['--governor-state', file]);
    expect((await run.exit).code).toBe(0);
    const warnings = run.stderr().match(/cohort: warning: .*/g) ?? [];
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(file);
    expect(readResultLines(out).map((line) => line.outcome)).toEqual([
      'complete',
      'complete',
      'complete',
      'complete',
    ]);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ version: 1 });
  });

  it.runIf(process.platform === 'linux')(
    'an unwritable PATH: one warning, and the batch completes',
    async () => {
      const { run, out } = batch(['--governor-state', UNUSABLE]);
      expect((await run.exit).code).toBe(0);
      const warnings = run.stderr().match(/cohort: warning: .*/g) ?? [];
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(UNUSABLE);
      // The CLI names its flag, not the library's option.
      expect(warnings[0]).toContain('`--governor-state`');
      expect(readResultLines(out)).toHaveLength(4);
    },
  );

  it('`off` with `--governor off` is refused; so is an empty PATH', async () => {
    const both = runCli(['agent', 'hello', '--governor', 'off', '--governor-state', 'x.json']);
    expect((await both.exit).code).toBe(2);
    expect(both.stderr()).toContain('Expected either `--governor off` or `--governor-state`');
    const empty = runCli(['agent', 'hello', '--governor-state', '']);
    expect((await empty.exit).code).toBe(2);
    expect(empty.stderr()).toContain('Expected `--governor-state` to be a non-empty string');
  });

  it('the help lists it, for the engine commands and the worker', async () => {
    for (const command of ['batch', 'worker']) {
      const run = runCli([command, '--help']);
      expect((await run.exit).code).toBe(0);
      expect(run.stdout()).toContain('--governor-state PATH|off');
    }
  });

  it('leaves an entry at PATH, which holds neither the API key nor the base URL', async () => {
    const file = path.join(tempDir('cohort-state-'), 'governor-state.json');
    const apiKey = 'sk-ant-api03-DISTINCTIVE-FAKE-KEY-4f9c2a7e1b';
    const tasks = writeTasks(20);
    const out = path.join(tempDir(), 'results.jsonl');
    const run = runCli(
      ['batch', tasks, '--out', out, '--base-url', model.url, '--governor-state', file],
      { ANTHROPIC_API_KEY: apiKey },
    );
    expect((await run.exit).code).toBe(0);
    const bytes = readFileSync(file, 'utf8');
    expect(Object.keys(JSON.parse(bytes).keys)).toHaveLength(1);
    for (const secret of [apiKey, 'DISTINCTIVE', model.url, '127.0.0.1', 'claude']) {
      expect(bytes).not.toContain(secret);
    }
  });

  it('`off` writes no file', async () => {
    await withCacheHome(async (cache) => {
      const { run } = batch(['--governor-state', 'off']);
      expect((await run.exit).code).toBe(0);
      expect(existsSync(path.join(cache, 'cohort'))).toBe(false);
    });
  });
});

describe.skipIf(redisMissing)(
  redisMissing
    ? `cohort worker --governor-state (skipped: ${redisMissing})`
    : 'cohort worker --governor-state',
  () => {
    let redis: RedisRig;

    beforeAll(async () => {
      redis = await startRedis();
    });

    afterAll(async () => {
      await stopWorkers();
      await redis?.stop();
    });

    it('a worker warns once of a corrupt file and rewrites it when it drains', async () => {
      const file = corruptFile();
      const fleet = await startWorkers(redis, 1, ['--threads', '1', '--governor-state', file]);
      const worker = fleet.workers[0]!;
      expect((await worker.term()).code).toBe(0);
      const warnings = worker.stderr().match(/cohort: warning: .*/g) ?? [];
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(file);
      expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ version: 1 });
    });
  },
);
