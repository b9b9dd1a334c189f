import type { AgentResult, CancelReason } from '../shared/result.js';
import type { AgentInfo } from '../shared/tools/spawn-tools.js';
import type { ChildHandle } from './runners/local/pool.js';

interface Live {
  handle: ChildHandle;
  logDir: string;
  ceiling: NodeJS.Timeout;
}

/**
 * The live async agents of one owner (a session, or a child that spawns its own): listable,
 * cancellable, each with a reaper timer at its lifetime ceiling. An entry leaves when its agent
 * settles; `onSettle` then gets the result.
 */
export class AgentRegistry {
  readonly #live = new Map<string, Live>();

  get size(): number {
    return this.#live.size;
  }

  add(
    handle: ChildHandle,
    options: { logDir: string; ceilingMs: number; onSettle: (result: AgentResult) => void },
  ): void {
    // At the ceiling the reaper cancels it with reason `ceiling`.
    const ceiling = setTimeout(() => handle.cancel('ceiling'), options.ceilingMs);
    this.#live.set(handle.id, { handle, logDir: options.logDir, ceiling });
    void handle.result.then((result) => {
      clearTimeout(ceiling);
      this.#live.delete(result.id);
      options.onSettle(result);
    });
  }

  list(): AgentInfo[] {
    const now = performance.now();
    return [...this.#live.entries()].map(([id, live]) => ({
      id,
      title: live.handle.title,
      status: live.handle.status === 'queued' ? 'queued' : 'running',
      logDir: live.logDir,
      elapsedMs: Math.round(now - live.handle.spawnedAt),
    }));
  }

  cancel(id: string, reason: CancelReason = 'user'): { id: string; wasLive: boolean } {
    const live = this.#live.get(id);
    return { id, wasLive: live ? live.handle.cancel(reason) : false };
  }

  /** Cancels every live agent; resolves when each has its result. */
  cancelAll(reason: CancelReason): Promise<AgentResult[]> {
    const handles = [...this.#live.values()].map((live) => live.handle);
    for (const handle of handles) handle.cancel(reason);
    return Promise.all(handles.map((handle) => handle.result));
  }
}
