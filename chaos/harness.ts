import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine } from '../src/main/engine.js';
import { mapAgents } from '../src/main/map-agents.js';
import type { ChildHandle } from '../src/main/runners/local/pool.js';
import { Session, type SessionEvent } from '../src/main/session.js';
import type { AgentEvent } from '../src/shared/events.js';
import type { MessageParam } from '../src/shared/provider/types.js';
import { type AgentOutcome, type AgentResult, emptyOutcomeCounts } from '../src/shared/result.js';
import { type ScriptStep, scriptBlock, startScriptedModel } from '../src/testing/index.js';
import { Random } from './random.js';
import { emptyFaults, type FaultCounts, randomChild, severeChild } from './scripts.js';

export interface ChaosOptions {
  seed: number;
  /** Children spawned directly on the engine, with every fault including worker killers. */
  children: number;
  /** Rounds of async agents spawned by a session's root, with clears in between. */
  sessionRounds: number;
  perRound: number;
  /** Tasks fanned out with mapAgents, aborted part-way. */
  batchTasks: number;
  /** Children still running when the engine is shut down. */
  shutdownAgents: number;
  threads?: number;
  /** How long to wait for every result before counting the missing ones as lost, in ms. */
  patienceMs?: number;
  log?: (line: string) => void;
}

export interface ChaosReport {
  seed: number;
  agents: number;
  faults: FaultCounts;
  outcomes: Record<AgentOutcome, number>;
  /** Spawned agents with no result. */
  lost: number;
  /** Agents with more than one result. */
  duplicated: number;
  /** Results delivered to a session whose generation had moved on. */
  staleDelivered: number;
  /** Results of an older generation that were held back, as they must be. */
  staleHeldBack: number;
  /** Transcripts with a tool_use not answered by a tool_result in the next message. */
  invalidTranscripts: number;
  /** Times a child was resumed on a fresh worker. */
  resumed: number;
  /** Children that failed because they crashed their worker too often. */
  failedByCrash: number;
  /** Failed results by their failure code (`overloaded`, `worker_crashed`, …). */
  failures: Record<string, number>;
  elapsedMs: number;
}

function toolsModule(): string {
  const here = fileURLToPath(import.meta.url);
  // The tests' tool module: one level up from the sources (vitest), two from dist/chaos.
  const fromSources = path.resolve(path.dirname(here), '../test/fixtures/test-tools.mjs');
  return existsSync(fromSources)
    ? fromSources
    : path.resolve(path.dirname(here), '../../test/fixtures/test-tools.mjs');
}

/** Counts results and events per agent id, across every part of the run. */
class Ledger {
  readonly spawned = new Set<string>();
  readonly settles = new Map<string, number>();
  readonly results = new Map<string, AgentResult>();
  resumed = 0;

  spawn(id: string): void {
    this.spawned.add(id);
  }

  event(event: AgentEvent | SessionEvent): void {
    if (event.type === 'agent-resume') this.resumed++;
    if (event.type !== 'agent-settle') return;
    this.settles.set(event.agentId, (this.settles.get(event.agentId) ?? 0) + 1);
    this.results.set(event.agentId, event.result);
  }
}

function transcriptValid(logDir: string): boolean {
  const file = path.join(logDir, 'transcript.jsonl');
  if (!existsSync(file)) return true;
  const messages = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as MessageParam);
  return messages.every((message, index) => {
    if (message.role !== 'assistant' || typeof message.content === 'string') return true;
    const uses = message.content.flatMap((block) => (block.type === 'tool_use' ? [block.id] : []));
    if (uses.length === 0) return true;
    const next = messages[index + 1];
    if (!next || typeof next.content === 'string') return false;
    const answered = next.content.flatMap((block) =>
      block.type === 'tool_result' ? [block.tool_use_id] : [],
    );
    return JSON.stringify(answered) === JSON.stringify(uses);
  });
}

function withPatience<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    void promise.then((value) => {
      clearTimeout(timer);
      resolve(value);
    });
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs thousands of agents against the scripted model with faults injected at random (seeded),
 * and checks for every agent: exactly one result, none lost, none duplicated, no stale result
 * delivered, and a valid transcript.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const started = performance.now();
  const log = options.log ?? (() => {});
  const random = new Random(options.seed);
  const faults = emptyFaults();
  const ledger = new Ledger();
  const patience = options.patienceMs ?? 120_000;
  const model = await startScriptedModel({ port: 0, seed: options.seed });
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'cohort-chaos-'));
  const engine = await Engine.start({
    threads: options.threads ?? 2,
    logDir,
    toolModules: [toolsModule()],
    cancelGraceMs: 200,
    maxCrashes: 2,
    maxOldGenerationSizeMb: 256,
    maxSteps: 10,
    provider: {
      baseURL: model.url,
      model: 'cohort-chaos',
      maxRetries: 3,
      backoffBaseMs: 2,
      backoffMaxMs: 40,
      idleTimeoutMs: 1000,
    },
  });
  let staleDelivered = 0;
  let staleHeldBack = 0;
  const handles: ChildHandle[] = [];
  try {
    // ── Part 1: children with every fault, random cancels ─────────────────────────────────
    log(`chaos: ${options.children} children with faults`);
    for (let index = 0; index < options.children; index++) {
      const forced = (['crash', 'exit', 'hog', 'spin'] as const)[index];
      const plan = forced
        ? severeChild(forced, faults)
        : randomChild(random, faults, { severe: true });
      let handle!: ChildHandle;
      handle = engine.spawn({
        title: `child ${index}`,
        prompt: `Chaos child ${index}.\n${scriptBlock({ steps: plan.steps })}`,
        streamText: false,
        onEvent: (event) => {
          ledger.event(event);
          // A stuck tool never returns by itself: cancel it, as a user would.
          if (event.type === 'tool-call' && event.name === 'spin') handle.cancel('user');
        },
      });
      ledger.spawn(handle.id);
      handles.push(handle);
      if (!plan.stuck && random.chance(0.04)) {
        faults['random-cancel']++;
        const at = random.int(0, 300);
        setTimeout(() => handle.cancel('user'), at);
      }
    }

    // ── Part 2: a session spawning async agents, with clears while results settle ──────────
    log(`chaos: a session, ${options.sessionRounds} rounds of ${options.perRound} async agents`);
    const session = new Session(engine, { autoWake: false });
    const sessionEvents = (async () => {
      for await (const event of session.events()) {
        if (event.type === 'agent-start' && event.mode === 'async') ledger.spawn(event.agentId);
        if (event.type === 'agent-stale') staleHeldBack++;
        ledger.event(event);
      }
    })();
    let epochStart = true;
    let seenDelivered = 0;
    const epochSteps = (): ScriptStep[] => {
      const steps: ScriptStep[] = [];
      for (let round = 0; round < options.sessionRounds; round++) {
        const calls = Array.from({ length: options.perRound }, (_, index) => ({
          name: 'agent',
          input: {
            title: `async ${round}.${index}`,
            mode: 'async',
            prompt: `Async child.\n${scriptBlock({ steps: randomChild(random, faults, { severe: false }).steps })}`,
          },
        }));
        steps.push({ calls }, { text: `round ${round} spawned` });
      }
      steps.push({ text: 'final delivery' }, { text: 'spare' }, { text: 'spare' });
      return steps;
    };
    for (let round = 0; round < options.sessionRounds; round++) {
      const prompt = epochStart
        ? `Run the rounds.\n${scriptBlock({ steps: epochSteps() })}`
        : 'Next round.';
      epochStart = false;
      const turn = await session.send(prompt);
      const delivered = session.delivered.slice(seenDelivered);
      seenDelivered = session.delivered.length;
      staleDelivered += delivered.filter((result) => result.generation !== turn.generation).length;
      if (random.chance(0.3)) {
        // Clear while this round's results are settling.
        await sleep(random.int(0, 30));
        faults['clear-while-settling']++;
        session.clear();
        epochStart = true;
        seenDelivered = session.delivered.length;
      }
    }
    await withPatience(session.waitIdle(), patience);
    if (session.pending.length > 0) {
      const generation = session.generation;
      await session.send(
        epochStart ? `Deliver.\n${scriptBlock({ steps: [{ text: 'delivered' }] })}` : 'Deliver.',
      );
      const delivered = session.delivered.slice(seenDelivered);
      staleDelivered += delivered.filter((result) => result.generation !== generation).length;
    }

    // ── Part 3: a batch fan-out, aborted part-way ────────────────────────────────────────────
    log(`chaos: a batch of ${options.batchTasks}`);
    const controller = new AbortController();
    const abortAfter = random.int(Math.floor(options.batchTasks / 2), options.batchTasks);
    const specs = Array.from({ length: options.batchTasks }, (_, index) => ({
      title: `task ${index}`,
      prompt: `Batch task ${index}.\n${scriptBlock({ steps: randomChild(random, faults, { severe: false }).steps })}`,
      streamText: false,
      onEvent: (event: AgentEvent) => ledger.event(event),
    }));
    let yielded = 0;
    const batchIds = new Set<string>();
    for await (const { result } of mapAgents(engine, specs, {
      concurrency: 64,
      signal: controller.signal,
    })) {
      if (batchIds.has(result.id))
        ledger.settles.set(result.id, (ledger.settles.get(result.id) ?? 0) + 1);
      batchIds.add(result.id);
      ledger.spawn(result.id);
      yielded++;
      if (yielded === abortAfter) {
        faults['random-cancel']++;
        controller.abort('user');
      }
    }

    // ── Part 4: engine shutdown mid-flight ───────────────────────────────────────────────────
    log(`chaos: ${options.shutdownAgents} children, then shutdown`);
    faults['shutdown-mid-flight']++;
    for (let index = 0; index < options.shutdownAgents; index++) {
      const handle = engine.spawn({
        title: `late ${index}`,
        prompt: `Late child.\n${scriptBlock({ steps: [{ delayMs: random.int(0, 400), reply: 'made it' }] })}`,
        streamText: false,
        onEvent: (event) => ledger.event(event),
      });
      ledger.spawn(handle.id);
      handles.push(handle);
    }
    await sleep(random.int(0, 200));
    await withPatience(Promise.all(handles.map((handle) => handle.result)), patience);
    await session.close();
    await engine.close();
    await sessionEvents;
  } finally {
    await engine.close();
    await model.close();
  }

  const outcomes: Record<AgentOutcome, number> = emptyOutcomeCounts();
  let lost = 0;
  let duplicated = 0;
  let invalidTranscripts = 0;
  let failedByCrash = 0;
  const failures: Record<string, number> = {};
  for (const id of ledger.spawned) {
    const count = ledger.settles.get(id) ?? 0;
    if (count === 0) lost++;
    if (count > 1) duplicated++;
    const result = ledger.results.get(id);
    if (!result) continue;
    outcomes[result.outcome]++;
    if (result.code === 'worker_crashed') failedByCrash++;
    if (result.outcome === 'failed') {
      const code = result.code ?? 'missing';
      failures[code] = (failures[code] ?? 0) + 1;
    }
    if (!transcriptValid(result.logDir)) invalidTranscripts++;
  }
  return {
    seed: options.seed,
    agents: ledger.spawned.size,
    faults,
    outcomes,
    lost,
    duplicated,
    staleDelivered,
    staleHeldBack,
    invalidTranscripts,
    resumed: ledger.resumed,
    failedByCrash,
    failures,
    elapsedMs: Math.round(performance.now() - started),
  };
}
