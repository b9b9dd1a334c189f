// The agent tree, virtualised: only the rows in view (plus a few) exist in the DOM, and they are
// reused as the view scrolls. The flattened list of visible rows is rebuilt only when the
// structure, a collapse or the filter changes; row contents are repainted at most once a frame.

import { createRow, fill, set } from './tree-row.js';

const ROW_HEIGHT = 24;
const OVERSCAN = 8;
/** A subtree below the roots with more children than this starts collapsed. */
const COLLAPSE_ABOVE = 50;

export class TreeView {
  #store;
  #scroller;
  #spacer;
  #handlers;
  /** id → true/false where the user toggled; otherwise the default rule applies. */
  #expanded = new Map();
  /** The flattened visible rows: ids and their display depth. */
  #ids = [];
  #depths = [];
  #flatFor = -1;
  #pool = [];
  #frame = 0;
  #needsFlatten = true;
  #filterText = '';
  #filterStatus = '';
  #selected = '';
  #pending = new Set();
  /** With a filter on: the agents that match it (their ancestors are shown as context). */
  #matches = null;

  /**
   * @param {{ scroller: HTMLElement, spacer: HTMLElement, store: import('./store.js').Store,
   *   onOpen: (id: string) => void, onCancel: (id: string) => Promise<void>,
   *   onCount: (shown: number) => void }} options
   */
  constructor(options) {
    this.#store = options.store;
    this.#scroller = options.scroller;
    this.#spacer = options.spacer;
    this.#handlers = options;
    this.#scroller.addEventListener('scroll', () => this.schedule(), { passive: true });
    this.#scroller.addEventListener('click', (event) => this.#click(event));
    new ResizeObserver(() => this.schedule()).observe(this.#scroller);
  }

  /** Repaints on the next frame (once, however often it is asked). */
  schedule() {
    if (this.#frame) return;
    this.#frame = requestAnimationFrame(() => {
      this.#frame = 0;
      this.paint();
    });
  }

  /** The structure or the filter changed: re-flatten before the next paint. */
  invalidate() {
    this.#needsFlatten = true;
    this.schedule();
  }

  setFilter(text, status) {
    this.#filterText = text.trim().toLowerCase();
    this.#filterStatus = status;
    this.#scroller.scrollTop = 0;
    this.invalidate();
  }

  select(id) {
    this.#selected = id;
    this.schedule();
  }

  expandAll(open) {
    this.#expanded.clear();
    for (const id of this.#store.children.keys()) this.#expanded.set(id, open);
    this.invalidate();
  }

  /** Shows the row of an agent: expands its ancestors and scrolls it into view. */
  reveal(id) {
    const agents = this.#store.agents;
    let parent = agents.get(id)?.parent;
    for (let guard = 0; parent && agents.has(parent) && guard < 10_000; guard++) {
      this.#expanded.set(parent, true);
      parent = agents.get(parent).parent;
    }
    this.#flatten();
    const index = this.#ids.indexOf(id);
    if (index >= 0) {
      const top = index * ROW_HEIGHT;
      const view = this.#scroller.clientHeight;
      if (top < this.#scroller.scrollTop || top + ROW_HEIGHT > this.#scroller.scrollTop + view) {
        this.#scroller.scrollTop = Math.max(0, top - view / 2);
      }
    }
    this.schedule();
  }

  #isExpanded(id, depth, childCount) {
    const chosen = this.#expanded.get(id);
    if (chosen !== undefined) return chosen;
    return depth === 0 || childCount <= COLLAPSE_ABOVE;
  }

  #flatten() {
    this.#needsFlatten = false;
    this.#flatFor = this.#store.structureVersion;
    const ids = [];
    const depths = [];
    const children = this.#store.children;
    const keep = this.#filtered();
    // Iterative depth-first walk: a deep tree must not overflow the call stack.
    const stack = [];
    const roots = this.#store.roots;
    for (let index = roots.length - 1; index >= 0; index--) stack.push(roots[index], 0);
    while (stack.length > 0) {
      const depth = stack.pop();
      const id = stack.pop();
      if (keep && !keep.has(id)) continue;
      ids.push(id);
      depths.push(depth);
      const kids = children.get(id);
      if (!kids) continue;
      if (!keep && !this.#isExpanded(id, depth, kids.length)) continue;
      for (let index = kids.length - 1; index >= 0; index--) stack.push(kids[index], depth + 1);
    }
    this.#ids = ids;
    this.#depths = depths;
    this.#spacer.style.height = `${ids.length * ROW_HEIGHT}px`;
    this.#handlers.onCount?.(ids.length);
  }

  /** With a filter on: the matching agents and their ancestors (shown expanded); else null. */
  #filtered() {
    const text = this.#filterText;
    const status = this.#filterStatus;
    if (!text && !status) {
      this.#matches = null;
      return null;
    }
    const agents = this.#store.agents;
    const keep = new Set();
    const matches = new Set();
    this.#matches = matches;
    for (const [id, row] of agents) {
      if (status && row.status !== status && row.outcome !== status) continue;
      if (
        text &&
        !String(row.title ?? '')
          .toLowerCase()
          .includes(text) &&
        !id.toLowerCase().includes(text)
      ) {
        continue;
      }
      matches.add(id);
      let current = id;
      for (let guard = 0; current && !keep.has(current) && guard < 10_000; guard++) {
        keep.add(current);
        current = agents.get(current)?.parent;
      }
    }
    return keep;
  }

  /** Whether the filter depends on row contents (so any row change may change membership). */
  get filtering() {
    return Boolean(this.#filterText || this.#filterStatus);
  }

  paint() {
    if (this.#needsFlatten || this.#flatFor !== this.#store.structureVersion) this.#flatten();
    const scrollTop = this.#scroller.scrollTop;
    const height = this.#scroller.clientHeight;
    const first = Math.max(0, Math.floor(scrollTop / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(
      this.#ids.length,
      Math.ceil((scrollTop + height) / ROW_HEIGHT) + OVERSCAN,
    );
    const needed = Math.max(0, last - first);
    while (this.#pool.length < needed) {
      const row = createRow();
      this.#scroller.append(row.root);
      this.#pool.push(row);
    }
    const now = this.#store.now();
    const canCancel = Boolean(this.#store.run?.cancel) && !this.#store.ended;
    // Row `index` always lives in slot `index % pool size`: a scroll of ten rows rewrites ten
    // rows, and the rest keep their content and position (no layout for them).
    const size = this.#pool.length;
    const used = new Uint8Array(size);
    for (let index = first; index < last; index++) {
      const slot = index % size;
      used[slot] = 1;
      const row = this.#pool[slot];
      const id = this.#ids[index];
      const agent = this.#store.agents.get(id);
      if (!agent) continue;
      if (row.root.hidden) row.root.hidden = false;
      set(row, 'y', index * ROW_HEIGHT, (value) => {
        row.root.style.transform = `translateY(${value}px)`;
      });
      const depth = this.#depths[index];
      const kids = this.#store.children.get(id);
      fill(row, {
        agent,
        depth,
        childCount: kids ? kids.length : 0,
        expanded: kids ? this.filtering || this.#isExpanded(id, depth, kids.length) : false,
        selected: id === this.#selected,
        canCancel: canCancel && agent.status !== 'settled',
        pending: this.#pending.has(id),
        context: this.#matches ? !this.#matches.has(id) : false,
        now,
      });
    }
    for (let slot = 0; slot < size; slot++) {
      const row = this.#pool[slot];
      if (used[slot] || row.root.hidden) continue;
      // A hidden row keeps no hooks, so a test's selector never matches a row out of view.
      row.root.hidden = true;
      row.id = '';
      row.last = Object.create(null);
      row.root.removeAttribute('data-id');
      row.root.removeAttribute('data-status');
      row.root.removeAttribute('data-outcome');
    }
  }

  async #click(event) {
    const target = event.target;
    if (!(target instanceof Element)) return;
    const rowElement = target.closest('.row');
    if (!rowElement) return;
    const id = rowElement.getAttribute('data-id');
    if (!id) return;
    const action = target.closest('[data-action]')?.getAttribute('data-action');
    if (action === 'cancel') {
      event.stopPropagation();
      if (this.#pending.has(id)) return;
      this.#pending.add(id);
      this.schedule();
      try {
        await this.#handlers.onCancel(id);
      } finally {
        this.#pending.delete(id);
        this.schedule();
      }
      return;
    }
    if (action === 'toggle') {
      const index = this.#ids.indexOf(id);
      const kids = this.#store.children.get(id);
      if (!kids || this.filtering) {
        this.#handlers.onOpen(id);
        return;
      }
      const depth = index >= 0 ? this.#depths[index] : 0;
      this.#expanded.set(id, !this.#isExpanded(id, depth, kids.length));
      this.invalidate();
      return;
    }
    this.#handlers.onOpen(id);
  }
}
