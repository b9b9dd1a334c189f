/**
 * Tree budgets. An agent with `budget.tree` owns a ledger that its descendants' spending adds to.
 * The ledger lives on the main thread because its members run in any worker: each member's step
 * is reported here, and when the ledger (or one above it) is spent, every member is told, and
 * its meter (`treeSpent`) gives it one last turn.
 */
import type { Budget, BudgetKind, StepSpend } from '../shared/budget.js';
import { type BudgetSpent, reachedLimit } from '../shared/budget-meter.js';
import type { AgentResult } from '../shared/result.js';
import type { ServedChild, Serving, Uplink } from './runners/capabilities.js';

/** Options of a `TreeLedger`. */
export interface TreeLedgerOptions {
  budget: Budget;
  /** The nearest tree budget above this one: spending here adds to it too. */
  parent?: TreeLedger | undefined;
  /** The clock, in ms; default `performance.now`. Injected by tests. */
  now?: (() => number) | undefined;
}

interface Member {
  onSpent: (which: BudgetKind) => void;
  notified: boolean;
}

/**
 * One tree budget's spending: all its members' steps, and every descendant ledger's. A ledger is
 * attached to its parent only while it or a descendant has members, so a long session does not
 * keep every finished subtree reachable from the root.
 */
export class TreeLedger {
  readonly #budget: Budget;
  readonly #parent: TreeLedger | undefined;
  readonly #now: () => number;
  readonly #startedAt: number;
  readonly #spent: BudgetSpent = { inputTokens: 0, outputTokens: 0, costUsd: 0, steps: 0 };
  readonly #members = new Map<string, Member>();
  /** Descendant ledgers that have members: an exhaustion here must reach them. */
  readonly #children = new Set<TreeLedger>();
  /** This ledger's own limit, once its members were told; spending never goes back down. */
  #spentKind: BudgetKind | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: TreeLedgerOptions) {
    this.#budget = options.budget;
    this.#parent = options.parent;
    this.#now = options.now ?? (() => performance.now());
    this.#startedAt = this.#now();
  }

  /**
   * Adds a member; `onSpent` is called once, when this ledger or an ancestor is spent. A member
   * joining a ledger already spent is told too, but after `join` returns (in a microtask), so the
   * caller has finished wiring the member up before it hears.
   */
  join(id: string, onSpent: (which: BudgetKind) => void): void {
    if (this.#members.has(id)) throw new Error(`tree budget member ${id} joined twice`);
    const member: Member = { onSpent, notified: false };
    this.#members.set(id, member);
    this.#sync();
    if (this.exceeded() !== undefined) {
      queueMicrotask(() => {
        // It may have left, or been told by a step, before the microtask ran.
        const which = this.exceeded();
        if (which !== undefined && this.#members.get(id) === member) notify(member, which);
      });
    }
  }

  /** Removes a member; the last to leave (here and below) stops the time limit's timer. */
  leave(id: string): void {
    if (this.#members.delete(id)) this.#sync();
  }

  /** A member's step: adds to this ledger and every ancestor; notifies members when spent. */
  add(spend: StepSpend): void {
    const errors: unknown[] = [];
    for (let ledger: TreeLedger | undefined = this; ledger; ledger = ledger.#parent) {
      ledger.#spent.inputTokens += spend.inputTokens;
      ledger.#spent.outputTokens += spend.outputTokens;
      ledger.#spent.costUsd += spend.costUsd;
      ledger.#spent.steps += 1;
      ledger.#check(errors);
    }
    rethrow(errors);
  }

  /** This ledger's own limits (in `BUDGET_KINDS` order), then its parent's; undefined if within. */
  exceeded(): BudgetKind | undefined {
    return this.#spentKind ?? this.#ownReached() ?? this.#parent?.exceeded();
  }

  /** A copy of what this ledger's members and descendants have spent. */
  get spent(): BudgetSpent {
    return { ...this.#spent };
  }

  #ownReached(): BudgetKind | undefined {
    return reachedLimit(this.#budget, this.#spent, this.#now() - this.#startedAt);
  }

  /** Marks this ledger spent and tells its subtree, the first time a limit is reached. */
  #check(errors: unknown[]): void {
    if (this.#spentKind !== undefined) return;
    const which = this.#ownReached();
    if (which === undefined) return;
    this.#spentKind = which;
    this.#clearTimer();
    this.#notifyTree(which, errors);
  }

  #notifyTree(which: BudgetKind, errors: unknown[]): void {
    // One member's failing callback must not keep the others from hearing: collect, go on.
    for (const member of this.#members.values()) {
      try {
        notify(member, which);
      } catch (error) {
        errors.push(error);
      }
    }
    for (const child of this.#children) child.#notifyTree(which, errors);
  }

  /** Attaches to the parent and arms the timer while active; detaches and clears when not. */
  #sync(): void {
    const active = this.#members.size > 0 || this.#children.size > 0;
    if (this.#parent) {
      const had = this.#parent.#children.has(this);
      if (active && !had) this.#parent.#children.add(this);
      else if (!active && had) this.#parent.#children.delete(this);
      if (active !== had) this.#parent.#sync();
    }
    if (active) this.#armTimer();
    else this.#clearTimer();
  }

  /**
   * A time limit is reached with no step taken (members may all be waiting on a tool), so one
   * timer per ledger watches it. It is unref'd: a budget must not keep the process alive.
   */
  #armTimer(): void {
    const limit = this.#budget.timeMs;
    if (limit === undefined || this.#timer !== undefined || this.#spentKind !== undefined) return;
    const remaining = this.#startedAt + limit - this.#now();
    // At least 1 ms: a timer may fire a fraction early on the clock it is compared with.
    this.#timer = setTimeout(() => this.#onTimer(), Math.max(1, Math.ceil(remaining)));
    this.#timer.unref();
  }

  #onTimer(): void {
    this.#timer = undefined;
    const errors: unknown[] = [];
    this.#check(errors);
    // Early by a rounding error: wait out the rest.
    if (this.#spentKind === undefined) this.#armTimer();
    rethrow(errors);
  }

  #clearTimer(): void {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

/**
 * One child's membership of a tree budget, from its spawn until it settles (the `tree`
 * capability): its steps' spends add to the ledger, and when the ledger is spent the child is
 * told, on every run of it (a resumed one too), that it takes its last turn.
 */
export class TreeMember implements Serving<'spend'> {
  readonly #ledger: TreeLedger;
  readonly #child: ServedChild;
  /** The limit the tree reached, once the child was told. */
  #spent: BudgetKind | undefined;

  constructor(ledger: TreeLedger, child: ServedChild) {
    this.#ledger = ledger;
    this.#child = child;
    ledger.join(child.id, (which) => this.#treeSpent(which));
  }

  #treeSpent(which: BudgetKind): void {
    if (this.#child.status === 'settled' || this.#spent !== undefined) return;
    this.#spent = which;
    this.#child.tell({ type: 'budget-spent', which });
  }

  receive(message: Uplink<'spend'>): void {
    this.#ledger.add(message.spend);
  }

  runStarts(): void {
    if (this.#spent !== undefined) this.#child.tell({ type: 'budget-spent', which: this.#spent });
  }

  settled(_result: AgentResult): void {
    this.#ledger.leave(this.#child.id);
  }
}

function notify(member: Member, which: BudgetKind): void {
  if (member.notified) return;
  member.notified = true;
  member.onSpent(which);
}

function rethrow(errors: unknown[]): void {
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) throw new AggregateError(errors, 'tree budget callbacks failed');
}
