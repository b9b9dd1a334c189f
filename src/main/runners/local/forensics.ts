/** A child as forensics sees it: who it is and the tools it had open in its worker. */
export interface Witness {
  id: string;
  openTools: ReadonlySet<string>;
}

/** What main concluded about one dead worker, shared by every child that was on it. */
interface CrashRecord {
  /** Children blamed for it. */
  suspects: Set<string>;
  /** Whether the death was our doing (a stuck child past its cancel grace). */
  deliberate: boolean;
  /** Children of that worker not yet judged; the record goes when the last one is. */
  unjudged: Set<string>;
}

export interface Verdict {
  blamed: boolean;
  deliberate: boolean;
}

/**
 * Decides, once per dead worker, which of its children are to blame. A child is a suspect when
 * one of its own tools was running in that worker when it died (a `tool-enter` without its
 * `tool-exit`). A parent waiting on its children or on a host tool runs nothing in the worker:
 * those calls run on main and are never open here. When no child was in a tool the crash cannot
 * be attributed, and every child of that worker counts it.
 *
 * Records are keyed by thread id (never reused within a process) and pruned as soon as every
 * child that was on that worker has been judged.
 */
export class CrashForensics {
  readonly #records = new Map<number, CrashRecord>();

  /** Live records; for tests and stats. */
  get size(): number {
    return this.#records.size;
  }

  /**
   * A stuck child's worker is about to be terminated on purpose. True when the caller should
   * terminate it; false when that worker is already going down (the child then shares the blame).
   * `onThread` gives every child still on that worker, the first time it is needed.
   */
  terminating(threadId: number, stuck: string, onThread: () => readonly Witness[]): boolean {
    const record = this.#records.get(threadId);
    if (record) {
      record.suspects.add(stuck);
      return false;
    }
    // Asked for only here: thousands of cancelled children can pass their grace at once, and
    // reading every sibling for each of them would cost the square of their number.
    this.#records.set(threadId, {
      suspects: new Set([stuck]),
      deliberate: true,
      unjudged: new Set(onThread().map((child) => child.id)),
    });
    return true;
  }

  /**
   * Judges `child`, whose task on `threadId` ended without a result. `onThread` gives every child
   * still on that worker, with its last messages already read, the first time it is needed.
   */
  judge(threadId: number, child: string, onThread: () => readonly Witness[]): Verdict {
    let record = this.#records.get(threadId);
    if (!record) {
      const witnesses = onThread();
      const inTool = witnesses.filter((witness) => witness.openTools.size > 0);
      const suspects = inTool.length > 0 ? inTool : witnesses;
      record = {
        suspects: new Set(suspects.map((witness) => witness.id)),
        deliberate: false,
        unjudged: new Set(witnesses.map((witness) => witness.id)),
      };
      this.#records.set(threadId, record);
    }
    const verdict = { blamed: record.suspects.has(child), deliberate: record.deliberate };
    this.forget(threadId, child);
    return verdict;
  }

  /** `child` no longer needs judging on `threadId` (it was judged, or it settled). */
  forget(threadId: number | undefined, child: string): void {
    if (threadId === undefined) return;
    const record = this.#records.get(threadId);
    if (!record) return;
    record.unjudged.delete(child);
    if (record.unjudged.size === 0) this.#records.delete(threadId);
  }
}
