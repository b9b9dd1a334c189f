import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine } from '../src/main/engine.js';
import type { PoolStats } from '../src/main/runners/local/pool.js';
import { type AgentOutcome, emptyOutcomeCounts } from '../src/shared/result.js';
import { startScriptedModel } from '../src/testing/index.js';
import { auditJournal, type JournalAudit } from './audit.js';
import { Census } from './census.js';
import { CHAOS_MAX_DEPTH, type ChaosContext, Ledger, withPatience } from './context.js';
import { runBatch, shutdownMidFlight, spawnChildren } from './parts.js';
import { Random } from './random.js';
import { emptyFaults, type FaultCounts, PlanBook } from './scripts.js';
import {
  addSessionFigures,
  emptySessionFigures,
  runCloseTrials,
  runSessionRounds,
  type SessionFigures,
} from './sessions.js';

/** The chaos run's cancel grace: the stuck tools cost a thread this long each. */
export const DEFAULT_CHAOS_GRACE_MS = 1000;

export { CHAOS_MAX_DEPTH };

export interface ChaosOptions {
  seed: number;
  /** Children spawned directly on the engine, with every fault including worker killers. */
  children: number;
  /** Children spawned directly on the engine that spawn trees of agents down to depth 3. */
  trees: number;
  /** Rounds of async agents spawned by a session's root, with clears in between. */
  sessionRounds: number;
  perRound: number;
  /** Sessions closed while turns are queued behind a turn that runs trees. */
  closeTrials: number;
  /** Tasks fanned out with mapAgents, aborted part-way. */
  batchTasks: number;
  /** Children still running when the engine is shut down. */
  shutdownAgents: number;
  threads?: number;
  /**
   * How long a cancelled child may take to settle before its worker is terminated (default
   * 1,000 ms). Below what a loaded worker needs to answer a cancel, busy workers are terminated
   * as if stuck, and every child on them resumes.
   */
  cancelGraceMs?: number;
  /**
   * Keep the run's journal (default: removed once audited, unless the run broke an
   * invariant); the report names its folder when kept.
   */
  keepLogs?: boolean;
  /**
   * How long the run may go without any agent settling, while it waits for something that must
   * end, before it calls that wait a hang (default 60 s).
   */
  patienceMs?: number;
  log?: (line: string) => void;
}

/** Figures of the agents at one depth. */
export interface DepthFigures {
  agents: number;
  /** Spawned by a caller on the engine (not by an agent). */
  direct: number;
  sync: number;
  async: number;
  cancelled: number;
  /** With no result. */
  lost: number;
  /** Delivered to a parent (root or agent) in a turn or step of another generation. */
  staleDelivered: number;
  /** Delivered into a parent agent's transcript more than once. */
  redelivered: number;
}

export interface ChaosReport {
  seed: number;
  cancelGraceMs: number;
  /** Every agent spawned, at every depth (the census). */
  agents: number;
  /**
   * Of those, spawned again under a title already spawned: a parent resumed from before its
   * spawning step committed starts that step's agents again (its first ones are cancelled).
   */
  respawned: number;
  /** Cancelled results by their reason (`user`, `parent`, `clear`, `shutdown`, …). */
  cancelReasons: Record<string, number>;
  byDepth: Record<number, DepthFigures>;
  faults: FaultCounts;
  outcomes: Record<AgentOutcome, number>;
  /** Spawned agents with no result, at any depth. */
  lost: number;
  /** Agents the ledger saw settle more than once (where someone listens). */
  duplicated: number;
  /** Counts taken at the child ports; `duplicateResults` must be 0, `delivered` = `agents`. */
  port: PoolStats;
  /** Governor permits still held once every agent settled: 0, even after worker crashes. */
  governorHeld: number;
  /** Results delivered to a parent, at any depth, in a turn or step of another generation. */
  staleDelivered: number;
  /** Results of the roots' own async agents reported `agent-stale` (held back, as they must be). */
  staleHeldBack: number;
  /** Results delivered into a parent agent's transcript more than once. */
  redelivered: number;
  /** Results delivered into the transcript of an agent that is not their parent. */
  misdelivered: number;
  /** Transcripts with a tool_use not answered by a tool_result in the next message. */
  invalidTranscripts: number;
  journal: Omit<
    JournalAudit,
    'deliveries' | 'staleByDepth' | 'invalidTranscripts' | 'misdelivered'
  >;
  sessions: SessionFigures;
  /** Times a child was resumed on a fresh worker (as its listeners saw). */
  resumed: number;
  /** Of those, after cohort terminated a worker for a child that outlived its cancel grace. */
  resumedForStuck: number;
  /** Failed results by their failure code (`overloaded`, `worker_crashed`, …). */
  failures: Record<string, number>;
  /**
   * Agents failed `worker_crashed` or `worker_lost` whose script runs no worker-killing tool: a
   * crash blamed on an innocent. Not an exactly-once breach, but not what the script asked for.
   */
  innocentCrashFailures: number;
  /** Waits that ran out of patience: each is a hang. */
  hangs: string[];
  elapsedMs: number;
  /** The run folder with its journal, when kept. */
  logDir?: string;
}

/** The number of broken invariants in a report: 0 for a clean run. */
export function brokenCount(report: ChaosReport): number {
  const { port, journal, sessions } = report;
  const portBalance =
    port.workerResults + port.mainResults - port.delivered - port.duplicateResults;
  return (
    report.lost +
    report.duplicated +
    report.governorHeld +
    port.duplicateResults +
    Math.abs(port.delivered - report.agents) +
    Math.abs(portBalance) +
    report.staleDelivered +
    report.redelivered +
    report.misdelivered +
    report.invalidTranscripts +
    journal.missingResults +
    journal.strayAgents +
    journal.mismatchedResults +
    sessions.unaccounted +
    sessions.twice +
    sessions.queuedTurnsRan +
    sessions.sendAfterCloseAccepted +
    sessions.eventsDropped +
    report.hangs.length
  );
}

function toolsModule(): string {
  const here = fileURLToPath(import.meta.url);
  // The tests' tool module: one level up from the sources (vitest), two from dist/chaos.
  const fromSources = path.resolve(path.dirname(here), '../test/fixtures/test-tools.mjs');
  return existsSync(fromSources)
    ? fromSources
    : path.resolve(path.dirname(here), '../../test/fixtures/test-tools.mjs');
}

/**
 * Runs thousands of agents, down to depth 3, against the scripted model with faults injected at
 * random (seeded), and checks for every agent at every depth: exactly one result (none lost, none
 * duplicated, at the ledger and at the ports), no stale result delivered, a `result.json` in its
 * folder, and a valid transcript; and for the sessions: no queued turn runs after close, every
 * root result is delivered, held back, or pending, exactly once.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const started = performance.now();
  const write = options.log ?? (() => {});
  const log = (line: string) =>
    write(`${((performance.now() - started) / 1000).toFixed(1).padStart(6)} s  ${line}`);
  const faults = emptyFaults();
  const book = new PlanBook();
  const census = new Census(book, faults);
  const ledger = new Ledger();
  const hangs: string[] = [];
  const patienceMs = options.patienceMs ?? 60_000;
  const model = await startScriptedModel({ port: 0, seed: options.seed });
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'cohort-chaos-'));
  const engine = await Engine.start({
    threads: options.threads ?? 2,
    logDir,
    toolModules: [toolsModule()],
    cancelGraceMs: options.cancelGraceMs ?? DEFAULT_CHAOS_GRACE_MS,
    maxCrashes: 2,
    maxOldGenerationSizeMb: 256,
    maxSteps: 10,
    maxDepth: CHAOS_MAX_DEPTH,
    provider: {
      baseURL: model.url,
      model: 'cohort-chaos',
      maxRetries: 3,
      backoffBaseMs: 2,
      backoffMaxMs: 40,
      idleTimeoutMs: 1000,
    },
    // The governor paces the scripted 429s and 529s; a 529 scripted past every retry must
    // still fail, so its patience is short.
    governor: { patienceMs: 1000 },
  });
  census.install(engine);
  const context: ChaosContext = {
    engine,
    live: new Random(options.seed ^ 0x5bd1e995),
    book,
    census,
    ledger,
    faults,
    patienceMs,
    hangs,
    log,
  };
  // Each part writes its scripts from a Random of its own: they replay from the seed, whatever
  // order the parts, which run at once, draw in.
  const randomFor = (part: number) => new Random(options.seed + part * 0x9e3779b1);
  const sessions = emptySessionFigures();
  let closing = false;
  try {
    spawnChildren(context, randomFor(1), options);
    const [rounds, closes] = await Promise.all([
      runSessionRounds(context, randomFor(2), {
        rounds: options.sessionRounds,
        perRound: options.perRound,
        treeShare: 0.25,
        maxDepth: CHAOS_MAX_DEPTH,
      }),
      runCloseTrials(context, randomFor(3), {
        trials: options.closeTrials,
        maxDepth: CHAOS_MAX_DEPTH,
      }),
      runBatch(context, randomFor(4), options.batchTasks),
    ]);
    addSessionFigures(sessions, rounds);
    addSessionFigures(sessions, closes);
    log('chaos: waiting for every agent so far');
    await withPatience(context, 'every agent before shutdown', census.settled());
    await shutdownMidFlight(context, randomFor(5), options.shutdownAgents);
    closing = true;
    await withPatience(context, 'engine.close', engine.close());
  } finally {
    census.stop();
    if (!closing) await withPatience(context, 'engine.close', engine.close());
    await model.close();
  }
  const figures = report({ options, started, context, sessions, logDir });
  // A broken run keeps its journal: it is the evidence.
  if (options.keepLogs || brokenCount(figures) > 0) figures.logDir = logDir;
  else rmSync(logDir, { recursive: true, force: true });
  return figures;
}

function emptyDepthFigures(): DepthFigures {
  return {
    agents: 0,
    direct: 0,
    sync: 0,
    async: 0,
    cancelled: 0,
    lost: 0,
    staleDelivered: 0,
    redelivered: 0,
  };
}

function report(input: {
  options: ChaosOptions;
  started: number;
  context: ChaosContext;
  sessions: SessionFigures;
  logDir: string;
}): ChaosReport {
  const { census, ledger, faults, engine, hangs, book } = input.context;
  const audit = auditJournal(input.logDir, census.agents, (record) => census.parentKnown(record));
  const outcomes = emptyOutcomeCounts();
  const failures: Record<string, number> = {};
  const cancelReasons: Record<string, number> = {};
  const titles = new Set<string>();
  const byDepth: Record<number, DepthFigures> = {};
  let lost = 0;
  let innocentCrashFailures = 0;
  for (const record of census.agents.values()) {
    const depth = byDepth[record.depth] ?? emptyDepthFigures();
    byDepth[record.depth] = depth;
    depth.agents++;
    depth[record.mode]++;
    titles.add(record.title);
    const result = record.result;
    if (!result) {
      lost++;
      depth.lost++;
      continue;
    }
    outcomes[result.outcome]++;
    if (result.outcome === 'cancelled') {
      depth.cancelled++;
      const reason = result.reason ?? 'missing';
      cancelReasons[reason] = (cancelReasons[reason] ?? 0) + 1;
    }
    if (result.outcome === 'failed') {
      const code = result.code ?? 'missing';
      failures[code] = (failures[code] ?? 0) + 1;
      const planned = book.get(record.title)?.faults;
      const killers = planned
        ? planned['tool-crash'] +
          planned['tool-exit'] +
          planned['memory-limit'] +
          planned['stuck-tool']
        : 0;
      if ((code === 'worker_crashed' || code === 'worker_lost') && killers === 0) {
        innocentCrashFailures++;
      }
    }
  }
  let redelivered = 0;
  for (const [id, count] of audit.deliveries) {
    if (count < 2) continue;
    redelivered++;
    const depth = byDepth[census.agents.get(id)?.depth ?? 0];
    if (depth) depth.redelivered++;
  }
  let staleDelivered = input.sessions.staleDelivered;
  if (byDepth[1]) byDepth[1].staleDelivered += input.sessions.staleDelivered;
  for (const [depth, count] of audit.staleByDepth) {
    staleDelivered += count;
    const figures = byDepth[depth];
    if (figures) figures.staleDelivered += count;
  }
  return {
    seed: input.options.seed,
    cancelGraceMs: input.options.cancelGraceMs ?? DEFAULT_CHAOS_GRACE_MS,
    agents: census.agents.size,
    respawned: census.agents.size - titles.size,
    cancelReasons,
    byDepth,
    faults: { ...faults },
    outcomes,
    lost,
    duplicated: ledger.duplicated(),
    port: engine.stats,
    governorHeld: engine.governor?.held ?? 0,
    staleDelivered,
    staleHeldBack: input.sessions.heldBack,
    redelivered,
    misdelivered: audit.misdelivered,
    invalidTranscripts: audit.invalidTranscripts,
    journal: {
      journaled: audit.journaled,
      results: audit.results,
      missingResults: audit.missingResults,
      strayAgents: audit.strayAgents,
      mismatchedResults: audit.mismatchedResults,
    },
    sessions: input.sessions,
    resumed: ledger.resumed,
    resumedForStuck: ledger.resumedForStuck,
    failures,
    innocentCrashFailures,
    hangs: [...hangs],
    elapsedMs: Math.round(performance.now() - input.started),
  };
}
