// One row of the agent tree (tree.js): its elements, made once and reused for whichever agent
// the row shows, and its repaint, which touches only what changed since the row last showed it.

import { count, duration, element, tokensOf, usd } from './format.js';

/** Indentation per depth, in px. */
const INDENT = 16;

export function createRow() {
  const root = element('div', 'row');
  root.hidden = true;
  const title = element('div', 'c-title');
  const toggle = element('span', 'toggle');
  toggle.setAttribute('data-action', 'toggle');
  const dot = element('span', 'dot');
  const text = element('span', 'title');
  const id = element('span', 'id');
  title.append(toggle, dot, text, id);
  const tokens = element('span', 'c-num');
  const cost = element('span', 'c-num');
  const subtreeTokens = element('span', 'c-num sub');
  const subtreeCost = element('span', 'c-num sub');
  const elapsed = element('span', 'c-num');
  const action = element('span', 'c-act');
  const cancel = element('button', 'cancel', 'Cancel');
  cancel.type = 'button';
  cancel.setAttribute('data-action', 'cancel');
  cancel.hidden = true;
  action.append(cancel);
  root.append(title, tokens, cost, subtreeTokens, subtreeCost, elapsed, action);
  return {
    root,
    title,
    toggle,
    dot,
    text,
    idText: id,
    tokens,
    cost,
    subtreeTokens,
    subtreeCost,
    elapsed,
    cancel,
    id: '',
    last: Object.create(null),
  };
}

/** Writes a value only when it changed: most rows in view do not change between frames. */
export function set(row, key, value, apply) {
  if (row.last[key] === value) return;
  row.last[key] = value;
  apply(value);
}

export function fill(row, view) {
  const { agent } = view;
  const root = row.root;
  if (row.id !== agent.id) {
    row.id = agent.id;
    root.setAttribute('data-id', agent.id);
  }
  set(row, 'status', agent.status, (value) => root.setAttribute('data-status', value));
  set(row, 'outcome', agent.status === 'settled' ? (agent.outcome ?? '') : '', (value) => {
    if (value) root.setAttribute('data-outcome', value);
    else root.removeAttribute('data-outcome');
  });
  set(row, 'context', view.context, (value) => root.classList.toggle('context', value));
  set(row, 'selected', view.selected, (value) => root.classList.toggle('selected', value));
  set(row, 'indent', view.depth, (value) => {
    row.title.style.paddingLeft = `${4 + value * INDENT}px`;
  });
  const toggle = view.childCount > 0 ? (view.expanded ? '▾' : '▸') : '';
  set(row, 'toggle', toggle, (value) => {
    row.toggle.textContent = value;
  });
  set(
    row,
    'dot',
    agent.status === 'settled' ? (agent.outcome ?? 'settled') : agent.status,
    (value) => row.dot.setAttribute('data-state', value),
  );
  set(row, 'text', agent.title ?? '', (value) => {
    row.text.textContent = value;
    row.text.title = value;
  });
  set(row, 'idText', agent.id, (value) => {
    row.idText.textContent = value;
  });
  // The dot's hover text: why it did not complete, else its status (the key holds what it shows).
  set(
    row,
    'reason',
    agent.reason ? `${agent.code ? `${agent.code}: ` : ''}${agent.reason}` : agent.status,
    (value) => {
      row.dot.title = value;
    },
  );
  set(row, 'tokens', count(tokensOf(agent.usage)), (value) => {
    row.tokens.textContent = value;
  });
  set(row, 'cost', usd(agent.costUsd), (value) => {
    row.cost.textContent = value;
  });
  set(row, 'subtreeTokens', count(agent.subtree?.tokens), (value) => {
    row.subtreeTokens.textContent = value;
  });
  set(row, 'subtreeCost', usd(agent.subtree?.costUsd), (value) => {
    row.subtreeCost.textContent = value;
  });
  const end = agent.endedAt ?? (agent.status === 'running' ? view.now : undefined);
  const elapsed = agent.startedAt && end ? duration(end - agent.startedAt) : '–';
  set(row, 'elapsed', elapsed, (value) => {
    row.elapsed.textContent = value;
  });
  set(row, 'canCancel', view.canCancel, (value) => {
    row.cancel.hidden = !value;
  });
  // A reused row shows another agent: the hover text names the agent, so it is in the key.
  const subtree = view.childCount > 0;
  set(row, 'cancelText', `${subtree ? 'Cancel subtree' : 'Cancel'} ${agent.id}`, () => {
    row.cancel.textContent = subtree ? 'Cancel subtree' : 'Cancel';
    row.cancel.title = subtree
      ? `Cancel ${agent.id} and every agent it started`
      : `Cancel ${agent.id}`;
  });
  set(row, 'pending', view.pending, (value) => {
    row.cancel.disabled = value;
  });
}
