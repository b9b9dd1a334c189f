import { Session, type TurnResult } from '../src/main/session.js';
import type { AgentResult } from '../src/shared/result.js';
import { type ScriptCall, type ScriptStep, scriptBlock } from '../src/testing/index.js';
import { type ChaosContext, sleep, withPatience } from './context.js';
import type { Random } from './random.js';
import { randomChild, treeCall } from './scripts.js';

/** What the sessions' roots saw of their own async agents, and how their turns ended. */
export interface SessionFigures {
  sessions: number;
  /** Async agents the roots started (depth 1). */
  rootAsync: number;
  /** Their results delivered to a root. */
  delivered: number;
  /** Their results reported `agent-stale`: of an older generation, or after close. */
  heldBack: number;
  /** Their results still in an inbox when the session closed. */
  pendingAtClose: number;
  /** Root async agents whose result is in none of those three. */
  unaccounted: number;
  /** Root async agents whose result is in more than one of them, or delivered twice. */
  twice: number;
  /** Results delivered in a turn of another generation than theirs. */
  staleDelivered: number;
  /** Turns queued when close() was called, that ended `cancelled` (shutdown) without running. */
  turnsNotRun: number;
  /** Turns that started after close() was called, or ended otherwise without running. */
  queuedTurnsRan: number;
  /** `send()` calls after close() that were accepted. */
  sendAfterCloseAccepted: number;
  /** Events a watcher lost because it fell behind: the figures above are then incomplete. */
  eventsDropped: number;
  /**
   * Agents of a closed session's trees still running when close() resolved: close() waits for
   * the root's own agents; their agents are cancelled `parent` after them. An observation.
   */
  outlivedClose: number;
}

export function emptySessionFigures(): SessionFigures {
  return {
    sessions: 0,
    rootAsync: 0,
    delivered: 0,
    heldBack: 0,
    pendingAtClose: 0,
    unaccounted: 0,
    twice: 0,
    staleDelivered: 0,
    turnsNotRun: 0,
    queuedTurnsRan: 0,
    sendAfterCloseAccepted: 0,
    eventsDropped: 0,
    outlivedClose: 0,
  };
}

/** Reads a session's whole event stream, from its opening to its close. */
class SessionWatch {
  /** The root's async agents, from their `agent-start`. */
  readonly rootAsync = new Set<string>();
  /** `agent-stale` reports, by id, of the root's async agents. */
  readonly stale = new Map<string, number>();
  /** Every turn that started: its generation and how many results it delivered. */
  readonly turns: { generation: number; delivered: number }[] = [];
  dropped = 0;
  readonly done: Promise<void>;
  #settleWaiters: (() => void)[] = [];

  constructor(session: Session, context: ChaosContext) {
    this.done = (async () => {
      for await (const event of session.events()) {
        context.ledger.event(event);
        if (event.type === 'agent-start' && event.depth === 1 && event.mode === 'async') {
          this.rootAsync.add(event.agentId);
        }
        if (event.type === 'agent-settle' && this.rootAsync.has(event.agentId)) {
          for (const wake of this.#settleWaiters.splice(0)) wake();
        }
        // Stale reports of deeper agents (the scopes of the root's sync children) are not the root's.
        if (event.type === 'agent-stale' && this.rootAsync.has(event.agentId)) {
          this.stale.set(event.agentId, (this.stale.get(event.agentId) ?? 0) + 1);
        }
        if (event.type === 'turn-start') {
          this.turns.push({ generation: event.generation, delivered: event.delivered });
        }
        if (event.type === 'events-dropped') this.dropped += event.count;
      }
    })();
  }

  /** Resolves when the next result of one of the root's async agents settles. */
  nextRootSettle(): Promise<void> {
    return new Promise((resolve) => this.#settleWaiters.push(resolve));
  }

  /**
   * After the session closed and its stream ended: every root async agent's result must be in
   * exactly one place, delivered, held back as stale, or still pending; each delivered result
   * must be of the generation of the turn that delivered it.
   */
  account(session: Session, into: SessionFigures): void {
    const delivered = session.delivered;
    const pending = new Set(session.pending.map((result) => result.id));
    const deliveredCount = new Map<string, number>();
    for (const result of delivered) {
      deliveredCount.set(result.id, (deliveredCount.get(result.id) ?? 0) + 1);
    }
    into.sessions++;
    into.rootAsync += this.rootAsync.size;
    into.delivered += delivered.length;
    into.pendingAtClose += pending.size;
    into.eventsDropped += this.dropped;
    for (const id of this.rootAsync) {
      const places =
        (deliveredCount.get(id) ?? 0) + (this.stale.get(id) ?? 0) + (pending.has(id) ? 1 : 0);
      if (places === 0) into.unaccounted++;
      if (places > 1) into.twice++;
    }
    for (const count of this.stale.values()) into.heldBack += count;
    // Turns never overlap, and each appends what it delivered: replay them in order.
    let next = 0;
    for (const turn of this.turns) {
      const batch: AgentResult[] = delivered.slice(next, next + turn.delivered);
      next += turn.delivered;
      into.staleDelivered += batch.filter((result) => result.generation !== turn.generation).length;
    }
  }
}

/**
 * A session spawning rounds of async agents (a share of them trees down to depth 3), with
 * root-level cancels at random moments, `clear()` while results settle, and `clear()` while a
 * turn delivers its inbox.
 */
export async function runSessionRounds(
  context: ChaosContext,
  random: Random,
  options: { rounds: number; perRound: number; treeShare: number; maxDepth: number },
): Promise<SessionFigures> {
  const { live, book, census, faults } = context;
  context.log(`chaos: a session, ${options.rounds} rounds of ${options.perRound} async agents`);
  const figures = emptySessionFigures();
  const session = new Session(context.engine, { autoWake: false });
  const watch = new SessionWatch(session, context);
  let epoch = 0;
  const epochSteps = (from: number): ScriptStep[] => {
    const steps: ScriptStep[] = [];
    for (let round = from; round < options.rounds; round++) {
      const calls = Array.from({ length: options.perRound }, (_, index): ScriptCall => {
        const title = `e${epoch}r${round}.${index}#a`;
        if (random.chance(options.treeShare)) {
          return treeCall(random, book, {
            title,
            mode: 'async',
            maxDepth: options.maxDepth,
            // Depth 1 is cancelled through the session below, at random.
            cancelChance: [0, 0, 0.15, 0.15],
          });
        }
        const plan = randomChild(random, { severe: false });
        book.add(title, { faults: plan.faults });
        return {
          name: 'agent',
          input: { title, mode: 'async', prompt: `Async child.\n${scriptBlock(plan.steps)}` },
        };
      });
      // A slow first answer, so a clear() can land while the turn that delivers the inbox runs.
      steps.push({ delayMs: 20, calls }, { text: `round ${round} spawned` });
    }
    steps.push({ text: 'final delivery' }, { text: 'spare' }, { text: 'spare' });
    epoch++;
    return steps;
  };
  // The generation the root's script was written for: a clear empties the transcript, and the
  // next turn's message must carry a new script.
  let scripted = -1;
  const promptFor = (round: number): string => {
    if (session.generation === scripted) return 'Next round.';
    scripted = session.generation;
    return `Run the rounds.\n${scriptBlock({ steps: epochSteps(round) })}`;
  };
  for (let round = 0; round < options.rounds; round++) {
    // Round 1 always clears while its turn delivers the inbox: it waits until there is something
    // to deliver. Later rounds wait for a result half the time, and clear during delivery at
    // random when they have something.
    const wait = round === 1 || (round > 1 && random.chance(0.5));
    if (wait && session.pending.length === 0 && session.list().length > 0) {
      await withPatience(context, 'a root result (rounds)', watch.nextRootSettle());
    }
    const delivering = session.pending.length > 0;
    const sent = session.send(promptFor(round));
    // The last round is never cleared: its results are delivered by the final turn.
    const last = round === options.rounds - 1;
    const clearDuring = delivering && !last && (round === 1 || live.chance(0.3));
    if (clearDuring) {
      await sleep(live.int(0, 10));
      session.clear();
    }
    const turn = await sent;
    if (clearDuring && turn.outcome === 'cancelled' && turn.reason === 'clear') {
      faults['clear-during-delivery']++;
    }
    // Root-level cancels at random moments: the oldest live agent after each turn, others at random.
    for (const [index, agent] of session.list().entries()) {
      const record = census.agents.get(agent.id);
      if (!record || (index > 0 && !live.chance(0.08))) continue;
      census.schedule(live.int(0, 150), () =>
        census.cancel(record, () => session.cancel(agent.id).wasLive, 'session'),
      );
    }
    // Round 2 always clears while its agents settle; later rounds at random.
    if (!last && (round === 2 || (round > 2 && random.chance(0.3)))) {
      await sleep(random.int(0, 30));
      if (session.list().length + session.pending.length > 0) faults['clear-while-settling']++;
      session.clear();
    } else {
      // Let some results arrive, for the next turn to deliver.
      await sleep(random.int(0, 20));
    }
  }
  await withPatience(context, 'session.waitIdle (rounds)', session.waitIdle());
  if (session.pending.length > 0) {
    const prompt =
      session.generation === scripted
        ? 'Deliver.'
        : `Deliver.\n${scriptBlock({ steps: [{ text: 'delivered' }] })}`;
    await withPatience(context, 'final delivery turn', session.send(prompt));
  }
  await withPatience(context, 'session.close (rounds)', session.close());
  await withPatience(context, 'session events (rounds)', watch.done);
  watch.account(session, figures);
  context.log('chaos: session rounds done');
  return figures;
}

/**
 * Sessions closed while turns are queued: a first turn starts trees (one async, one sync, which
 * keeps the turn running), more sends queue behind it, and close() comes at a random moment. No
 * queued turn may run; each ends `cancelled` (shutdown); a send after close is refused.
 */
export async function runCloseTrials(
  context: ChaosContext,
  random: Random,
  options: { trials: number; maxDepth: number },
): Promise<SessionFigures> {
  const { book, census, faults } = context;
  context.log(`chaos: ${options.trials} sessions closed with turns queued`);
  const figures = emptySessionFigures();
  for (let trial = 0; trial < options.trials; trial++) {
    const session = new Session(context.engine, { autoWake: false });
    const watch = new SessionWatch(session, context);
    const tree = (index: number, mode: 'sync' | 'async') =>
      treeCall(random, book, {
        title: `c${trial}.${index}#${mode === 'sync' ? 's' : 'a'}`,
        mode,
        maxDepth: options.maxDepth,
        cancelChance: [0, 0, 0.1, 0.1],
      });
    const leaf = randomChild(random, { severe: false });
    book.add(`c${trial}.q#a`, { faults: leaf.faults });
    const script: ScriptStep[] = [
      { calls: [tree(0, 'async'), tree(1, 'sync')] },
      { text: 'first turn done' },
      // Played only if a queued turn ran: it would start one more agent.
      {
        calls: [
          {
            name: 'agent',
            input: { title: `c${trial}.q#a`, mode: 'async', prompt: scriptBlock(leaf.steps) },
          },
        ],
      },
      { text: 'a queued turn ran' },
      { text: 'spare' },
      { text: 'spare' },
    ];
    const queued = random.int(2, 4);
    const sends: Promise<TurnResult>[] = [
      session.send(`Start.\n${scriptBlock({ steps: script })}`),
      ...Array.from({ length: queued }, (_, index) => session.send(`Queued ${index}.`)),
    ];
    const ended = sends.map(() => false);
    sends.forEach((sent, index) => {
      void sent.then(
        () => {
          ended[index] = true;
        },
        () => {
          ended[index] = true;
        },
      );
    });
    await sleep(random.int(5, 80));
    // Turns never overlap: at this moment at most one runs, the others ended or wait.
    const endedBefore = ended.filter(Boolean).length;
    const closing = session.close();
    const refused = await session.send('After close.').then(
      () => false,
      () => true,
    );
    if (!refused) figures.sendAfterCloseAccepted++;
    await withPatience(context, `session.close (trial ${trial})`, closing);
    figures.outlivedClose += [...census.agents.values()].filter(
      (record) => record.title.startsWith(`c${trial}.`) && record.handle.status !== 'settled',
    ).length;
    const results =
      (await withPatience(context, `turns (trial ${trial})`, Promise.all(sends))) ?? [];
    await withPatience(context, `session events (trial ${trial})`, watch.done);
    const started = watch.turns.length;
    // A turn that started after close() began: beyond the ones ended and the one running.
    figures.queuedTurnsRan += Math.max(0, started - endedBefore - 1);
    // Turns run in order: the ones that never started are the last.
    for (const result of results.slice(started)) {
      if (
        result.outcome === 'cancelled' &&
        result.reason === 'shutdown' &&
        result.usage.steps === 0
      ) {
        figures.turnsNotRun++;
        faults['close-with-queued']++;
      } else figures.queuedTurnsRan++;
    }
    watch.account(session, figures);
  }
  context.log('chaos: close trials done');
  return figures;
}

export function addSessionFigures(into: SessionFigures, from: SessionFigures): void {
  for (const key of Object.keys(into) as (keyof SessionFigures)[]) into[key] += from[key];
}
