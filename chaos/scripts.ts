import type { ScriptStep } from '../src/testing/index.js';
import type { Random } from './random.js';

/** Every kind of fault the chaos run injects, counted as planned. */
export type FaultKind =
  | 'http-429'
  | 'http-529'
  | 'disconnect'
  | 'stall'
  | 'malformed-sse'
  | 'tool-throws'
  | 'tool-crash'
  | 'tool-exit'
  | 'memory-limit'
  | 'stuck-tool'
  | 'random-cancel'
  | 'clear-while-settling'
  | 'shutdown-mid-flight'
  | 'provider-gives-up';

export type FaultCounts = Record<FaultKind, number>;

export function emptyFaults(): FaultCounts {
  return {
    'http-429': 0,
    'http-529': 0,
    disconnect: 0,
    stall: 0,
    'malformed-sse': 0,
    'tool-throws': 0,
    'tool-crash': 0,
    'tool-exit': 0,
    'memory-limit': 0,
    'stuck-tool': 0,
    'random-cancel': 0,
    'clear-while-settling': 0,
    'shutdown-mid-flight': 0,
    'provider-gives-up': 0,
  };
}

export interface ChildPlan {
  steps: ScriptStep[];
  /** The child calls a tool that never returns: it must be cancelled to end. */
  stuck: boolean;
}

/**
 * A random child script: 1-4 steps of tool calls and text, each maybe carrying a transient
 * provider fault, ending in a reply (or, sometimes, in prose that earns the nudge). Worker-killing
 * tools are rare, as in life.
 */
/** A child whose first step calls one worker-killing tool, so every run has each of them. */
export function severeChild(
  kind: 'crash' | 'exit' | 'hog' | 'spin',
  faults: FaultCounts,
): ChildPlan {
  const counted = {
    crash: 'tool-crash',
    exit: 'tool-exit',
    hog: 'memory-limit',
    spin: 'stuck-tool',
  } as const;
  faults[counted[kind]]++;
  return {
    steps: [{ calls: [{ name: kind, input: {} }] }, { reply: 'unreachable' }],
    stuck: kind === 'spin',
  };
}

export function randomChild(
  random: Random,
  faults: FaultCounts,
  options: { severe: boolean },
): ChildPlan {
  const steps: ScriptStep[] = [];
  const length = random.int(1, 4);
  let stuck = false;
  for (let index = 0; index < length; index++) {
    const step: ScriptStep = {};
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
  return { steps, stuck };
}
