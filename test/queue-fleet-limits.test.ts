/**
 * The account's rate limit, kept by a fleet: three real `cohort worker` processes, each with its
 * own governor, against the scripted model's request limit over HTTP. With the buckets shared in
 * Redis they keep to it together.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../src/main/engine.js';
import type { AgentResult } from '../src/shared/result.js';
import { type ScriptedModel, startScriptedModel } from '../src/testing/index.js';
import { scripted, TEST_TOOLS, tempDir } from './helpers.js';
import { startWorkers, stopWorkers } from './queue-helpers.js';
import { type RedisRig, redisMissing, startRedis } from './redis.js';

/** 600 a minute in buckets of one second: 10 requests at once, then 10 a second. */
const RPM = 600;
const AGENTS = 20;

describe.skipIf(redisMissing)(
  redisMissing ? `fleet limits (skipped: ${redisMissing})` : 'fleet limits',
  () => {
    let rig: RedisRig;
    let model: ScriptedModel;
    beforeAll(async () => {
      rig = await startRedis();
    });
    afterAll(async () => {
      await stopWorkers();
      await rig?.stop();
    });
    afterEach(async () => {
      await stopWorkers();
      await model?.close();
    });

    /** Runs AGENTS two-step agents on three workers; the model's count of 429s, and the results. */
    async function run(name: string, shared: 'on' | 'off') {
      model = await startScriptedModel({ rpm: RPM, bucketSeconds: 1 });
      // Each worker starts from the account's limit (as --rpm says), as a real fleet would
      // once the first response's headers said it.
      await startWorkers(rig, 3, [
        '--queue-name',
        name,
        '--threads',
        '1',
        '--rpm',
        String(RPM),
        '--shared-limits',
        shared,
        '--log-dir',
        tempDir(),
      ]);
      const engine = await Engine.start({
        queue: { url: rig.url, name },
        provider: { baseURL: model.url, maxRetries: 8 },
        toolModules: [TEST_TOOLS],
        logDir: tempDir(),
      });
      try {
        const results: AgentResult[] = await Promise.all(
          Array.from({ length: AGENTS }, (_, index) =>
            engine.run({
              title: `agent ${index}`,
              prompt: scripted([
                { calls: [{ name: 'echo', input: {} }] },
                { reply: `done ${index}` },
              ]),
            }),
          ),
        );
        return {
          results,
          refused: model.stats.rateLimited429,
          workers: new Set(results.map((r) => r.worker)),
        };
      } finally {
        await engine.close();
      }
    }

    it("with the buckets shared in Redis, three workers keep to one account's limit", async () => {
      const shared = await run('limits-shared', 'on');
      expect(shared.results.filter((r) => r.outcome !== 'complete')).toEqual([]);
      // The work was spread: more than one worker answered.
      expect(shared.workers.size).toBeGreaterThan(1);
      // Each worker's own bucket would let it send the whole limit: three of them, three times
      // too much, which the server refuses (76 times for 60 requests, on a quiet machine with
      // --shared-limits off; how many depends on how fast the machine sends, so that contrast is
      // shown by queue-limits.test.ts's governors, not here). Leasing from one bucket, the fleet
      // is refused rarely if ever.
      expect(shared.refused).toBeLessThanOrEqual(4);
    });
  },
);
