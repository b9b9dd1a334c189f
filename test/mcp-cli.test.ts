// biome-ignore-all lint/suspicious/noTemplateCurlyInString: `${VAR}` is the config files' own syntax, tested here as text.
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it, vi } from 'vitest';
import { startScriptedModel } from '../src/testing/index.js';
import { runCli } from './cli-helpers.js';
import { readTranscript, scripted, tempDir } from './helpers.js';
import { alive, fixtureEntry, fixtureLog, PATIENCE } from './mcp-helpers.js';

/** The registry's filesystem server, a devDependency, started as the README's example does. */
const FILESYSTEM_SERVER = fileURLToPath(
  new URL('../node_modules/.bin/mcp-server-filesystem', import.meta.url),
);

const run = promisify(execFile);
const EXAMPLE = fileURLToPath(new URL('../examples/mcp.mjs', import.meta.url));

function configFile(servers: Record<string, unknown>): string {
  const file = path.join(tempDir('cohort-mcp-cli-'), '.mcp.json');
  writeFileSync(file, JSON.stringify({ mcpServers: servers }, null, 2));
  return file;
}

const call = (name: string, input: Record<string, unknown> = {}) => ({ name, input });

describe('the MCP example', () => {
  it('runs as written against the registry filesystem server, and exits by itself', async () => {
    const folder = tempDir('cohort-mcp-example-');
    writeFileSync(path.join(folder, 'a.txt'), 'a');
    const { stdout } = await run(process.execPath, [EXAMPLE, folder], { timeout: 60_000 });
    expect(stdout.trim().split('\n')).toEqual(['true', 'complete listed']);
  });
});

describe('cohort with --mcp-config', () => {
  it('gives an agent the tools of the registry filesystem server, with ${VAR} expanded', async () => {
    const folder = tempDir('cohort-mcp-files-');
    writeFileSync(path.join(folder, 'notes.txt'), 'the files server read this');
    const config = configFile({ files: { command: FILESYSTEM_SERVER, args: ['${NOTES_DIR}'] } });
    const run = runCli(
      [
        'agent',
        scripted([
          { calls: [call('mcp__files__read_text_file', { path: path.join(folder, 'notes.txt') })] },
          { reply: 'read' },
        ]),
        '--mcp-config',
        config,
        '--json',
      ],
      { NOTES_DIR: folder },
    );
    expect((await run.exit).code).toBe(0);
    const result = JSON.parse(run.stdout()) as { id: string; outcome: string; logDir: string };
    expect(result.outcome).toBe('complete');
    expect(JSON.stringify(readTranscript(result))).toContain('the files server read this');
  });

  it('exits 2 before any request for a bad file or a server that cannot start, naming it', async () => {
    const bad = path.join(tempDir('cohort-mcp-cli-'), '.mcp.json');
    writeFileSync(bad, '{"mcpServers": {"a": {"args": []}}}');
    const broken = configFile({ broken: { command: 'cohort-no-such-server' } });
    for (const [config, message] of [
      [bad, /Expected server `a` in `[^`]*\.mcp\.json` to have either `command`/],
      [
        broken,
        /Expected MCP server `broken` \(in `[^`]*\.mcp\.json`\) to start and list its tools/,
      ],
    ] as const) {
      const run = runCli(['agent', scripted([{ reply: 'never' }]), '--mcp-config', config]);
      expect((await run.exit).code).toBe(2);
      expect(run.stderr()).toMatch(message);
      // The built-in model was never started: nothing was asked of any model.
      expect(run.stderr()).not.toContain('using the built-in scripted model');
    }
  });

  /**
   * `cohort agent` mid-call on a server that outlives its stdin's end (so only a signal cohort
   * sends can end it), and that server's pid and log.
   */
  async function agentMidCall(options: { detached?: boolean } = {}) {
    const { entry, log } = fixtureEntry({ env: { MCP_FIXTURE_MODE: 'stubborn' } });
    const config = configFile({ fx: entry });
    const run = runCli(
      [
        'agent',
        scripted([{ calls: [call('mcp__fx__hold')] }, { reply: 'never' }]),
        '--mcp-config',
        config,
      ],
      {},
      options,
    );
    // Started once (the check lists its tools, and the engine then uses it), and mid-call.
    await vi.waitFor(
      () => expect(fixtureLog(log).map((record) => record.event)).toEqual(['start', 'holding']),
      PATIENCE,
    );
    const pid = fixtureLog(log)[0]!.pid;
    const events = () => fixtureLog(log).map((record) => record.event);
    return { run, pid, events };
  }

  it('ends its servers on a graceful stop by a signal, stdin closed then SIGTERM', async () => {
    const { run, pid, events } = await agentMidCall();
    run.child.kill('SIGTERM');
    expect((await run.exit).code).toBe(143);
    // The close waited for it: it is gone when cohort is.
    expect(alive(pid)).toBe(false);
    expect(events()).toContain('sigterm');
  });

  it('ends its servers when a second signal forces the stop', async () => {
    const { run, pid, events } = await agentMidCall();
    // Back to back: the second arrives while the first one's close still waits on the server.
    run.child.kill('SIGINT');
    run.child.kill('SIGTERM');
    await run.exit;
    expect(run.stderr()).toMatch(/a second signal \(SIG[A-Z]+\): stopped at once/);
    // Sent SIGTERM on the way out, not waited for.
    await vi.waitFor(() => expect(alive(pid)).toBe(false), PATIENCE);
    expect(events()).toContain('sigterm');
  });

  it('keeps a terminal’s Ctrl-C from its servers: cohort alone decides what it stops', async () => {
    const { run, pid, events } = await agentMidCall({ detached: true });
    // A terminal sends Ctrl-C to its foreground job's whole process group.
    process.kill(-run.child.pid!, 'SIGINT');
    expect((await run.exit).code).toBe(130);
    expect(alive(pid)).toBe(false);
    expect(events()).not.toContain('sigint');
    expect(events()).toContain('sigterm');
  });
});

describe('cohort batch --estimate with --mcp-config', () => {
  it('counts the MCP tools an agent is offered, as the run is then charged', async () => {
    const model = await startScriptedModel({ port: 0 });
    try {
      const dir = tempDir('cohort-mcp-estimate-');
      const tasks = path.join(dir, 'tasks.jsonl');
      writeFileSync(
        tasks,
        `${JSON.stringify({ id: 'a', prompt: 'Say hi.' })}\n${JSON.stringify({ id: 'b', prompt: 'Say hi.', tools: ['mcp__fx__*'] })}\n`,
      );
      const config = configFile({ fx: fixtureEntry().entry });
      const batch = async (args: string[]) => {
        const run = runCli([
          'batch',
          tasks,
          '--mcp-config',
          config,
          '--base-url',
          model.url,
          ...args,
        ]);
        expect((await run.exit).code, run.stderr()).toBe(0);
        return run.stdout();
      };
      const estimate = JSON.parse(await batch(['--estimate', '--json'])) as { inputTokens: number };
      const out = path.join(dir, 'results.jsonl');
      await batch(['--out', out, '--quiet']);
      const charged = readFileSync(out, 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line).usage)
        .reduce(
          (sum, usage) => sum + usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens,
          0,
        );
      // Each task replies in one step: its first request is all it is charged for.
      expect(Math.abs(estimate.inputTokens - charged)).toBeLessThanOrEqual(charged * 0.01);
    } finally {
      await model.close();
    }
  });
});
