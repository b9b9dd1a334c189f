/**
 * Imports the engine's tool modules in a throw-away worker thread and reports each one's tool
 * names, or why it cannot be used. The engine's start-up check runs this instead of importing
 * on main: a module that opens a handle (a timer, a socket, a database pool) at import would
 * otherwise keep an engine-only program alive after `close()`, and one whose import never ends
 * could not be stopped. The worker is terminated when the check is over, whatever it holds.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { ProbeMessage } from '../shared/protocol.js';
import { loadToolModule, ToolModuleError } from '../shared/tools/modules.js';

const { modules } = workerData as { modules: string[] };
const post = (message: ProbeMessage) => parentPort!.postMessage(message);

for (const [index, modulePath] of modules.entries()) {
  try {
    const tools = await loadToolModule(modulePath);
    post({ type: 'module', index, names: tools.map((tool) => tool.name) });
  } catch (error) {
    const problem =
      error instanceof ToolModuleError
        ? error.problem
        : `importing it failed: ${error instanceof Error ? error.message : String(error)}`;
    post({ type: 'error', index, problem });
    break;
  }
}
post({ type: 'done' });
