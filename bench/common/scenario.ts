/**
 * One bench scenario: what each agent does and how fast the model answers, plus the ideal time
 * those imply. Every agent runs the same script: `steps - 1` steps that call the `work` tool,
 * then a step that replies.
 */
import { type ScriptStep, scriptBlock } from '../../src/testing/index.js';
import type { BenchOptions } from './options.js';

export interface Scenario {
  /** Agents in the run. */
  agents: number;
  /** Provider requests per agent: `steps - 1` tool steps, then the reply. */
  steps: number;
  /** Model time to first token, in ms (the scripted model's `--ttft-ms`). */
  ttftMs: number;
  /** Model output pacing, tokens per second; 0 is unpaced (`--tps`). */
  tps: number;
  /** Synchronous CPU burned by each `work` call, in ms. */
  cpuMs: number;
  /**
   * Model time before each response starts at all (its headers and `message_start`), in ms:
   * the script's `delayMs`, as a real API spends reading the prompt before it answers. Unset,
   * a response starts at once and only its first token waits for `ttftMs`.
   */
  responseDelayMs?: number;
}

type ScriptShape = Pick<Scenario, 'steps' | 'cpuMs' | 'responseDelayMs'>;

/**
 * A part's scenario from the flags: `--agents`, `--ttft-ms` and `--cpu-ms` when given, else the
 * part's own defaults (a part measures its own figure, not the quick sweep's); steps and pacing
 * as the flags say.
 */
export function scenarioOf(
  options: BenchOptions,
  defaults: Pick<Scenario, 'agents' | 'ttftMs' | 'cpuMs'>,
): Scenario {
  const given = (flag: string) => options.given.includes(flag);
  return {
    agents: given('agents') ? options.agents : defaults.agents,
    steps: options.steps,
    ttftMs: given('ttft-ms') ? options.ttftMs : defaults.ttftMs,
    tps: options.tps,
    cpuMs: given('cpu-ms') ? options.cpuMs : defaults.cpuMs,
  };
}

const REPLY_VALUE = 'done';

/** The script every agent of the scenario plays. */
export function agentScript(scenario: ScriptShape): ScriptStep[] {
  const delay = scenario.responseDelayMs ? { delayMs: scenario.responseDelayMs } : {};
  const work: ScriptStep = {
    calls: [{ name: 'work', input: { cpuMs: scenario.cpuMs } }],
    ...delay,
  };
  return [
    ...Array.from({ length: scenario.steps - 1 }, () => work),
    { reply: REPLY_VALUE, ...delay },
  ];
}

/**
 * The prompt of agent `index`. The instruction is for a real model (`--provider anthropic`), the
 * script block for the scripted model; each plays its part and ignores the other.
 */
export function agentPrompt(index: number, scenario: ScriptShape): string {
  const calls = scenario.steps - 1;
  const instruction =
    calls === 0
      ? `Call the reply tool with the result "${REPLY_VALUE}".`
      : `Call the work tool with {"cpuMs": ${scenario.cpuMs}} ${calls} time(s), one call per message, then call the reply tool with the result "${REPLY_VALUE}".`;
  return `Bench agent ${index}. ${instruction}\n\n${scriptBlock({ steps: agentScript(scenario) })}`;
}

/**
 * Output characters of each step as the scripted model counts and paces them: the JSON of each
 * tool call's input (the reply's input is `{"result": …}`). Pacing sends chars / 4 tokens.
 */
export function outputCharsPerStep(scenario: ScriptShape): number[] {
  return agentScript(scenario).map((step) => {
    const calls = step.calls ?? [];
    let chars = 0;
    for (const call of calls) {
      chars += JSON.stringify('reply' in call ? { result: call.reply } : (call.input ?? {})).length;
    }
    if (step.reply !== undefined) chars += JSON.stringify({ result: step.reply }).length;
    return chars;
  });
}

/**
 * The time one agent takes with no overhead at all, in ms: `steps × (ttft + response delay)
 * + Σ(output chars of a step / 4) / tps × 1000 + (steps − 1) × cpuMs`.
 */
export function idealAgentMs(scenario: Scenario): number {
  const generationMs =
    scenario.tps > 0
      ? outputCharsPerStep(scenario).reduce(
          (sum, chars) => sum + ((chars / 4) * 1000) / scenario.tps,
          0,
        )
      : 0;
  const responseMs = scenario.ttftMs + (scenario.responseDelayMs ?? 0);
  return scenario.steps * responseMs + generationMs + (scenario.steps - 1) * scenario.cpuMs;
}

/**
 * The makespan of a perfect engine with `concurrency` agents in flight: the agents go in
 * `ceil(agents / concurrency)` back-to-back waves of one ideal agent time each.
 */
export function idealMakespanMs(scenario: Scenario, concurrency: number): number {
  return Math.ceil(scenario.agents / concurrency) * idealAgentMs(scenario);
}

/** Characters per token as the scripted model counts a prompt. */
export { CHARS_PER_TOKEN } from '../../src/testing/output-shaping.js';

/**
 * The long system prompt that agents share: exactly `chars` characters of deterministic text,
 * the same on every call, standing for the instructions, tool manuals and reference material
 * a fan-out's children have in common. `prefix` numbers distinct prompts: each differs from the
 * others from its first line, so each is a prefix of its own to the prompt cache.
 */
export function sharedSystemPrompt(chars: number, prefix = 0): string {
  const document = prefix + 1;
  const parts = [`Reference document ${document} of the bench's agents.`];
  let length = parts[0]!.length;
  for (let section = 1; length < chars; section++) {
    const part =
      ` Section ${section} of document ${document}: every agent of the run is given this text` +
      ' before its task, as children of one fan-out share their instructions, the manuals of' +
      ' their tools and the material they work on.';
    parts.push(part);
    length += part.length;
  }
  return parts.join('').slice(0, chars);
}
