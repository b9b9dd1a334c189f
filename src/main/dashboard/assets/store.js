// The page's copy of the run: a `state` event replaces it, a `delta` event patches it.

export class Store {
  /** id → agent row, in the order the rows first arrived (spawn order). */
  agents = new Map();
  /** id → ids of its children, in arrival order. */
  children = new Map();
  /** Ids shown at the top: agents without a parent, or whose parent this page does not know. */
  roots = [];
  run = undefined;
  governor = [];
  totals = undefined;
  failures = [];
  series = [];
  limits = {};
  /** Server time minus this clock's time, so elapsed times run on the server's clock. */
  clockOffset = 0;
  /** The `end` event came: the run is over, nothing is left to cancel. */
  ended = false;
  /** Bumped whenever parent/child links change: the tree re-flattens only then. */
  structureVersion = 0;
  /** Bumped on every change of any row. */
  rowsVersion = 0;

  /** Takes a whole snapshot. */
  replace(state) {
    this.run = state.run;
    this.agents = new Map();
    for (const row of state.agents ?? []) this.agents.set(row.id, row);
    this.#summary(state);
    this.#link();
    this.rowsVersion++;
  }

  /**
   * Applies a delta: rows replace rows by id (new ids add rows), removed ids go, the rest
   * replaces wholesale.
   * Returns whether the tree's structure changed.
   */
  apply(delta) {
    let structure = false;
    for (const row of delta.agents ?? []) {
      const before = this.agents.get(row.id);
      if (!before || before.parent !== row.parent) structure = true;
      this.agents.set(row.id, row);
    }
    // Rows the server dropped to keep its memory bounded (its `maxAgents`).
    for (const id of delta.removed ?? []) {
      if (this.agents.delete(id)) structure = true;
    }
    this.#summary(delta);
    if (structure) this.#link();
    if (delta.agents?.length || delta.removed?.length) this.rowsVersion++;
    return structure;
  }

  /** The server's time now, as best this page knows it. */
  now() {
    return Date.now() + this.clockOffset;
  }

  #summary(source) {
    if (typeof source.now === 'number') this.clockOffset = source.now - Date.now();
    if (source.governor) this.governor = source.governor;
    if (source.totals) this.totals = source.totals;
    if (source.failures) this.failures = source.failures;
    if (source.series) this.series = source.series;
    if (source.limits) this.limits = source.limits;
  }

  #link() {
    const children = new Map();
    const roots = [];
    for (const [id, row] of this.agents) {
      const parent = row.parent;
      if (parent === null || parent === undefined || parent === id || !this.agents.has(parent)) {
        roots.push(id);
        continue;
      }
      const list = children.get(parent);
      if (list) list.push(id);
      else children.set(parent, [id]);
    }
    this.children = children;
    this.roots = roots;
    this.structureVersion++;
  }
}
