import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../src/main/engine.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { runCli } from './cli-helpers.js';
import { readTranscript, scripted, tempDir } from './helpers.js';
import { fixtureEntry, fixtureLog, resultText, toolResults } from './mcp-helpers.js';
import { startWorkers, stopWorkers } from './queue-helpers.js';
import { type RedisRig, redisMissing, startRedis } from './redis.js';

// Queue mode with MCP servers: the producer lists the tools, and each `cohort worker` starts its
// own servers from the same file and serves its jobs' calls on them.

describe.skipIf(redisMissing)(
  redisMissing
    ? `queue mode with MCP servers (skipped: ${redisMissing})`
    : 'queue mode with MCP servers',
  () => {
    const NAME = 'mcp';
    let rig: RedisRig | undefined;
    let model: ScriptedModel | undefined;
    let engine: Engine | undefined;
    const { entry, log } = fixtureEntry();
    const config = path.join(tempDir('cohort-queue-mcp-'), '.mcp.json');
    writeFileSync(config, JSON.stringify({ mcpServers: { fx: entry } }));

    beforeAll(async () => {
      rig = await startRedis();
      model = await startScriptedModel({ port: 0 });
      await startWorkers(rig, 1, [
        '--queue-name',
        NAME,
        '--threads',
        '1',
        '--log-dir',
        tempDir('cq-mcp-'),
        '--mcp-config',
        config,
      ]);
      engine = await Engine.start({
        logDir: tempDir('cq-mcp-logs-'),
        mcpConfig: [config],
        queue: { url: rig.socket, name: NAME },
        provider: { baseURL: model.url, model: 'cohort-scripted' },
      });
    });

    afterAll(async () => {
      await engine?.close();
      await stopWorkers();
      await model?.close();
      await rig?.stop();
    });

    it('runs a job’s MCP calls on the worker’s own server', async () => {
      // The worker started first: the first server process in the log is its own.
      const workerServer = fixtureLog(log).find((record) => record.event === 'start')?.pid;
      const results = await Promise.all(
        Array.from({ length: 3 }, (_, index) =>
          engine!.run({
            prompt: scripted([
              {
                calls: [
                  { name: 'mcp__fx__echo', input: { text: `job ${index}` } },
                  { name: 'mcp__fx__pid', input: {} },
                ],
              },
              { reply: 'done' },
            ]),
          }),
        ),
      );
      results.forEach((result, index) => {
        expect(result.outcome).toBe('complete');
        const [echo, pid] = toolResults(readTranscript(result)).map(resultText);
        expect(echo).toBe(`job ${index}`);
        expect(pid).toBe(String(workerServer));
      });
    });

    it('a worker whose MCP server cannot start exits 2 before it takes a job, naming it', async () => {
      const broken = path.join(tempDir('cohort-queue-mcp-'), '.mcp.json');
      writeFileSync(
        broken,
        JSON.stringify({ mcpServers: { broken: { command: 'cohort-no-such-server' } } }),
      );
      const run = runCli([
        'worker',
        '--queue',
        rig!.url,
        '--queue-name',
        'unused',
        '--log-dir',
        tempDir('cq-mcp-'),
        '--mcp-config',
        broken,
      ]);
      expect((await run.exit).code).toBe(2);
      expect(run.stderr()).toMatch(
        /Expected MCP server `broken` \(in `[^`]*\.mcp\.json`\) to start and list its tools/,
      );
    });
  },
);
