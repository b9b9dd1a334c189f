// Tools of the chaos run (a tool module: see docs/TOOLS.md). Plain JS so workers import it as is.
export const tools = [
  {
    name: 'echo',
    description: 'Returns its input.',
    inputSchema: { type: 'object', properties: { value: {} } },
    run: (input) => input.value ?? 'ok',
  },
  {
    name: 'throw',
    description: 'Throws: the model sees an is_error result and goes on.',
    inputSchema: { type: 'object' },
    run() {
      throw new Error('a tool that throws');
    },
  },
  {
    name: 'crash',
    description: 'An exception escapes the tool from a timer and kills the worker.',
    inputSchema: { type: 'object' },
    run: () =>
      new Promise(() => {
        setTimeout(() => {
          throw new Error('chaos: escaped from a tool');
        }, 0);
      }),
  },
  {
    name: 'exit',
    description: 'process.exit inside a tool ends the worker thread.',
    inputSchema: { type: 'object' },
    run() {
      process.exit(9);
    },
  },
  {
    name: 'hog',
    description: 'Allocates until the worker exceeds its memory limit.',
    inputSchema: { type: 'object' },
    run() {
      const hoard = [];
      for (;;) hoard.push(new Array(1_000_000).fill(hoard.length));
    },
  },
  {
    name: 'spin',
    description: 'A synchronous loop that ignores cancellation.',
    inputSchema: { type: 'object' },
    run() {
      for (;;) {
        // stuck on purpose
      }
    },
  },
];
