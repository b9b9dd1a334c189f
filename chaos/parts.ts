import { mapAgents } from '../src/main/map-agents.js';
import type { ChildHandle } from '../src/main/runners/local/pool.js';
import type { AgentEvent } from '../src/shared/events.js';
import { scriptBlock } from '../src/testing/index.js';
import { CHAOS_MAX_DEPTH, type ChaosContext, sleep } from './context.js';
import type { Random } from './random.js';
import { emptyFaults, randomChild, severeChild, treeAgent } from './scripts.js';

// The parts of the run that use the engine directly (the session parts are in sessions.ts).

/** Part 1: direct children with every fault, and trees down to depth 3 with planned cancels. */
export function spawnChildren(
  context: ChaosContext,
  random: Random,
  options: { children: number; trees: number },
): void {
  const { engine, book, ledger } = context;
  context.log(`chaos: ${options.children} children with faults, ${options.trees} trees`);
  for (let index = 0; index < options.children; index++) {
    const forced = (['crash', 'exit', 'hog', 'spin'] as const)[index];
    const plan = forced ? severeChild(forced) : randomChild(random, { severe: true });
    const title = `child ${index}`;
    book.add(title, {
      faults: plan.faults,
      ...(!plan.stuck && random.chance(0.04)
        ? { cancel: { trigger: 'spawn' as const, delayMs: random.int(0, 300) } }
        : {}),
    });
    let handle!: ChildHandle;
    handle = engine.spawn({
      title,
      prompt: `Chaos child ${index}.\n${scriptBlock({ steps: plan.steps })}`,
      streamText: false,
      onEvent: (event) => {
        ledger.event(event);
        // A stuck tool never returns by itself: cancel it, as a user would.
        if (event.type === 'tool-call' && event.name === 'spin' && event.agentId === handle.id) {
          handle.cancel('user');
        }
      },
    });
  }
  for (let index = 0; index < options.trees; index++) {
    const title = `tree ${index}`;
    const steps = treeAgent(random, book, {
      title,
      depth: 1,
      maxDepth: CHAOS_MAX_DEPTH,
      cancelChance: [0, 0.2, 0.2, 0.2],
    });
    engine.spawn({
      title,
      prompt: `A chaos tree.\n${scriptBlock({ steps })}`,
      streamText: false,
      // Listened to: the tree's sync agents stream into it, its async ones settle into it.
      onEvent: (event) => ledger.event(event),
    });
  }
}

/** Part: a mapAgents fan-out, aborted part-way. */
export async function runBatch(
  context: ChaosContext,
  random: Random,
  tasks: number,
): Promise<void> {
  const { book, ledger, faults } = context;
  context.log(`chaos: a batch of ${tasks}`);
  const controller = new AbortController();
  const abortAfter = random.int(Math.floor(tasks / 2), tasks);
  const specs = Array.from({ length: tasks }, (_, index) => {
    const plan = randomChild(random, { severe: false });
    const title = `task ${index}`;
    book.add(title, { faults: plan.faults });
    return {
      title,
      prompt: `Batch task ${index}.\n${scriptBlock({ steps: plan.steps })}`,
      streamText: false,
      onEvent: (event: AgentEvent) => ledger.event(event),
    };
  });
  let yielded = 0;
  const batchIds = new Set<string>();
  for await (const { result } of mapAgents(context.engine, specs, {
    concurrency: 64,
    signal: controller.signal,
  })) {
    // A task yielded twice is a duplicate too.
    if (batchIds.has(result.id)) ledger.settle(result.id);
    batchIds.add(result.id);
    yielded++;
    if (yielded === abortAfter) {
      faults['batch-abort']++;
      controller.abort('user');
    }
  }
  context.log('chaos: batch done');
}

/** Last part: children and trees still running when the engine shuts down. */
export async function shutdownMidFlight(
  context: ChaosContext,
  random: Random,
  agents: number,
): Promise<void> {
  const { engine, book, ledger, faults } = context;
  context.log(`chaos: ${agents} children, then shutdown`);
  for (let index = 0; index < agents; index++) {
    const tree = random.chance(0.1);
    const title = tree ? `late tree ${index}` : `late ${index}`;
    const steps = tree
      ? treeAgent(random, book, { title, depth: 1, maxDepth: CHAOS_MAX_DEPTH, cancelChance: [] })
      : [{ delayMs: random.int(50, 600), reply: 'made it' }];
    if (!tree) book.add(title, { faults: emptyFaults() });
    engine.spawn({
      title,
      prompt: `Late child.\n${scriptBlock({ steps })}`,
      streamText: false,
      onEvent: (event) => ledger.event(event),
    });
  }
  await sleep(random.int(200, 500));
  faults['shutdown-mid-flight'] += engine.liveCount;
}
