import { type ScriptCall, type ScriptStep, scriptBlock } from '../src/testing/index.js';
import type { Random } from './random.js';

/**
 * Every kind of fault the chaos run injects. The faults in an agent's script are counted when
 * that agent is spawned (a script never spawned injected nothing); the harness's own actions
 * (cancels, clears, closes, shutdown) are counted when they hit something live.
 */
export const FAULT_KINDS = [
  // In scripts: the provider.
  'http-429',
  'http-529',
  'disconnect',
  'stall',
  'malformed-sse',
  'provider-gives-up',
  // In scripts: tools.
  'tool-throws',
  'tool-crash',
  'tool-exit',
  'memory-limit',
  'stuck-tool',
  // In scripts: a parent looking at and poking its own agents through the host bridge.
  'scripted-agents',
  'scripted-agent-cancel',
  // The harness: cancels that reached a live agent, by the depth of that agent.
  'cancel-depth-1',
  'cancel-depth-2',
  'cancel-depth-3',
  /** Of those, cancels of an agent that had live agents of its own. */
  'cancel-ancestor',
  /** Of those, root-level cancels through `session.cancel(id)`. */
  'session-cancel',
  /** Agents still running when their parent settled (they must be cancelled `parent`). */
  'outlived-parent',
  'batch-abort',
  /** `session.clear()` right after a turn, while async agents settle. */
  'clear-while-settling',
  /** `session.clear()` that cancelled a turn delivering inbox results. */
  'clear-during-delivery',
  /** Turns still queued when `session.close()` was called. */
  'close-with-queued',
  /** Agents still live when the engine was shut down. */
  'shutdown-mid-flight',
] as const;

export type FaultKind = (typeof FAULT_KINDS)[number];

export type FaultCounts = Record<FaultKind, number>;

export function emptyFaults(): FaultCounts {
  return Object.fromEntries(FAULT_KINDS.map((kind) => [kind, 0])) as FaultCounts;
}

export function addFaults(into: FaultCounts, from: Readonly<FaultCounts>): void {
  for (const kind of FAULT_KINDS) into[kind] += from[kind];
}

/** When the harness cancels a planned agent: some time after it, or its first child, spawned. */
export interface CancelPlan {
  trigger: 'spawn' | 'first-child';
  delayMs: number;
}

/** What the harness knows about an agent it scripted, found by the agent's title. */
export interface AgentPlan {
  /** The faults in its own script (not its children's). */
  faults: FaultCounts;
  cancel?: CancelPlan;
}

/** The plans of every scripted agent, by title; the census applies one when its agent spawns. */
export class PlanBook {
  readonly #plans = new Map<string, AgentPlan>();

  add(title: string, plan: AgentPlan): void {
    if (this.#plans.has(title)) throw new Error(`chaos: two plans for the title \`${title}\``);
    this.#plans.set(title, plan);
  }

  get(title: string): AgentPlan | undefined {
    return this.#plans.get(title);
  }
}

export interface ChildPlan {
  steps: ScriptStep[];
  /** The child calls a tool that never returns: it must be cancelled to end. */
  stuck: boolean;
  faults: FaultCounts;
}

/** A child whose first step calls one worker-killing tool, so every run has each of them. */
export function severeChild(kind: 'crash' | 'exit' | 'hog' | 'spin'): ChildPlan {
  const counted = {
    crash: 'tool-crash',
    exit: 'tool-exit',
    hog: 'memory-limit',
    spin: 'stuck-tool',
  } as const;
  const faults = emptyFaults();
  faults[counted[kind]]++;
  return {
    steps: [{ calls: [{ name: kind, input: {} }] }, { reply: 'unreachable' }],
    stuck: kind === 'spin',
    faults,
  };
}

/** Maybe gives `step` a provider fault: mostly transient, rarely one past every retry. */
function providerFault(random: Random, step: ScriptStep, faults: FaultCounts): void {
  const roll = random.next();
  if (roll < 0.05) {
    step.error = { status: 429, retryAfterMs: random.int(1, 20) };
    step.faultAttempts = random.int(1, 2);
    faults['http-429']++;
  } else if (roll < 0.1) {
    step.error = { status: 529, retryAfterMs: random.int(1, 20) };
    step.faultAttempts = 1;
    faults['http-529']++;
  } else if (roll < 0.13) {
    step.disconnect = true;
    step.faultAttempts = 1;
    faults.disconnect++;
  } else if (roll < 0.16) {
    step.stall = { ms: 4000 };
    step.faultAttempts = 1;
    faults.stall++;
  } else if (roll < 0.19) {
    step.malformed = true;
    step.faultAttempts = 1;
    faults['malformed-sse']++;
  } else if (roll < 0.2) {
    // Overloaded beyond every retry: the child fails.
    step.error = { status: 529, retryAfterMs: 1 };
    faults['provider-gives-up']++;
  }
}

/**
 * A random child script: 1-4 steps of tool calls and text, each maybe carrying a provider fault,
 * ending in a reply (or, sometimes, in prose that earns the nudge). Worker-killing tools are rare,
 * as in life, and only with `severe`.
 */
export function randomChild(random: Random, options: { severe: boolean }): ChildPlan {
  const faults = emptyFaults();
  const steps: ScriptStep[] = [];
  const length = random.int(1, 4);
  let stuck = false;
  for (let index = 0; index < length; index++) {
    const step: ScriptStep = {};
    providerFault(random, step, faults);
    if (index < length - 1) {
      step.text = `step ${index}`;
      const tool = random.next();
      if (options.severe && tool < 0.004) {
        step.calls = [{ name: 'crash', input: {} }];
        faults['tool-crash']++;
      } else if (options.severe && tool < 0.008) {
        step.calls = [{ name: 'exit', input: {} }];
        faults['tool-exit']++;
      } else if (options.severe && tool < 0.01) {
        step.calls = [{ name: 'hog', input: {} }];
        faults['memory-limit']++;
      } else if (options.severe && tool < 0.013) {
        step.calls = [{ name: 'spin', input: {} }];
        faults['stuck-tool']++;
        stuck = true;
      } else if (tool < 0.1) {
        step.calls = [{ name: 'throw', input: {} }];
        faults['tool-throws']++;
      } else {
        step.calls = [{ name: 'echo', input: { value: index } }];
      }
    } else if (random.chance(0.05)) {
      step.text = 'I am done (but I forgot to reply).';
      steps.push(step);
      steps.push({ text: 'Still no reply.' });
      break;
    } else {
      step.reply = { step: index, note: 'chaos reply' };
    }
    steps.push(step);
    if (stuck) break;
  }
  return { steps, stuck, faults };
}

export type SpawnMode = 'sync' | 'async';

/**
 * Titles carry the tree: a child of `T` (or of `T#a`) is `T/<index>#s` (sync) or `T/<index>#a`
 * (async), so the census finds an agent's parent and mode from its title alone.
 */
export function childTitle(parent: string, index: number, mode: SpawnMode): string {
  return `${titleBase(parent)}/${index}#${mode === 'sync' ? 's' : 'a'}`;
}

/** A title without its mode mark. */
export function titleBase(title: string): string {
  return title.replace(/#[sa]$/, '');
}

/** The mode a title was spawned in by its parent's `agent` call; `direct` without a mark. */
export function modeOf(title: string): SpawnMode | 'direct' {
  if (title.endsWith('#s')) return 'sync';
  if (title.endsWith('#a')) return 'async';
  return 'direct';
}

/** The base title of the parent, for a title in a tree. */
export function parentBase(title: string): string | undefined {
  const base = titleBase(title);
  const slash = base.lastIndexOf('/');
  return slash < 0 ? undefined : base.slice(0, slash);
}

export interface TreeOptions {
  /** The agent's title (its children are named by `childTitle`). */
  title: string;
  depth: number;
  maxDepth: number;
  /** By depth (index 1, 2, 3…): the chance the harness cancels an agent of the tree. */
  cancelChance: readonly number[];
}

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** An id of the right shape that no agent has: a script cannot know a real one. */
function unknownAgentId(random: Random): string {
  let id = 'ag_';
  for (let index = 0; index < 12; index++) id += BASE32[random.int(0, 31)];
  return id;
}

/**
 * The script of an agent that may spawn a tree below it: at depth 1, 1-3 children; deeper, 0-2;
 * none at `maxDepth`. Each child is sync or async at random and is a tree itself. A spawning
 * agent starts its children in one batch, then lists them (`agents`) and cancels an id that is
 * not its own (`agent_cancel`), waits for its async children if it has any, and replies. A leaf
 * is a random child without worker killers, slow enough to its first answer to be cancelled.
 * Registers a plan (faults, maybe a cancel) for the agent and every descendant.
 */
export function treeAgent(random: Random, book: PlanBook, options: TreeOptions): ScriptStep[] {
  const faults = emptyFaults();
  const { depth, maxDepth, title } = options;
  const spawns = depth >= maxDepth ? 0 : depth === 1 ? random.int(1, 3) : random.int(0, 2);
  let steps: ScriptStep[];
  if (spawns === 0) {
    const leaf = randomChild(random, { severe: false });
    Object.assign(faults, leaf.faults);
    steps = leaf.steps;
    steps[0] = { ...steps[0], delayMs: random.int(10, 200) };
  } else {
    const calls: ScriptCall[] = [];
    let asyncChildren = 0;
    for (let index = 0; index < spawns; index++) {
      const mode: SpawnMode = random.chance(0.5) ? 'sync' : 'async';
      if (mode === 'async') asyncChildren++;
      const child = childTitle(title, index, mode);
      const childSteps = treeAgent(random, book, { ...options, title: child, depth: depth + 1 });
      calls.push({
        name: 'agent',
        input: {
          title: child,
          mode,
          prompt: `A ${mode} chaos agent at depth ${depth + 1}.\n${scriptBlock({ steps: childSteps })}`,
        },
      });
    }
    const start: ScriptStep = { text: 'Starting my agents.', calls };
    providerFault(random, start, faults);
    const poke: ScriptCall[] = [];
    if (random.chance(0.5)) {
      poke.push({ name: 'agents', input: {} });
      faults['scripted-agents']++;
    }
    if (random.chance(0.3)) {
      poke.push({ name: 'agent_cancel', input: { id: unknownAgentId(random) } });
      faults['scripted-agent-cancel']++;
    }
    if (poke.length === 0) poke.push({ name: 'echo', input: { value: 'tick' } });
    steps = [start, { calls: poke }];
    // A step with no calls: the agent waits for its async children's results (or is nudged).
    if (asyncChildren > 0) steps.push({ text: 'Waiting for my agents.' });
    steps.push({ reply: { depth, title, note: 'tree reply' } }, { reply: 'spare' });
  }
  const plan: AgentPlan = { faults };
  if (random.chance(options.cancelChance[depth] ?? 0)) {
    // A spawning agent is cancelled once its first child exists: a cancel of an ancestor.
    plan.cancel = { trigger: spawns > 0 ? 'first-child' : 'spawn', delayMs: random.int(0, 150) };
  }
  book.add(title, plan);
  return steps;
}

/** The `agent` tool call that starts a tree agent at depth 1 from a root. */
export function treeCall(
  random: Random,
  book: PlanBook,
  options: Omit<TreeOptions, 'depth'> & { mode: SpawnMode },
): ScriptCall {
  const steps = treeAgent(random, book, { ...options, depth: 1 });
  return {
    name: 'agent',
    input: {
      title: options.title,
      mode: options.mode,
      prompt: `A ${options.mode} chaos agent at depth 1.\n${scriptBlock({ steps })}`,
    },
  };
}
