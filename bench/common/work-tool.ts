/**
 * The bench's tool module (docs/TOOLS.md format): `work` burns `cpuMs` of synchronous CPU on the
 * thread that runs the agent, the way a parser or a tokenizer would, then answers briefly.
 */
import type { ToolDefinition } from '../../src/shared/tools/types.js';

/** Spins until `ms` have passed; it never yields, on purpose. */
export function burnCpu(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // Busy on purpose: the point is to hold the thread.
  }
}

const work: ToolDefinition<{ cpuMs: number }> = {
  name: 'work',
  description: 'Does cpuMs milliseconds of synchronous CPU work and says so.',
  inputSchema: {
    type: 'object',
    properties: { cpuMs: { type: 'number', minimum: 0, maximum: 60_000 } },
    required: ['cpuMs'],
  },
  run(input) {
    burnCpu(input.cpuMs);
    return `worked ${input.cpuMs} ms`;
  },
};

export const tools = [work];
