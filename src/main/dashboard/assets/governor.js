// The governor panel: one card per key. Few keys, so each update rebuilds the cards.

import { count, duration, element, percent } from './format.js';

/** Renders `states` (GovernorState[]) into `container` (#governor). */
export function renderGovernor(container, states, now) {
  const cards = [];
  for (const state of states ?? []) cards.push(card(state, now));
  if (cards.length === 0) cards.push(element('div', 'empty-note', 'no provider calls yet'));
  container.replaceChildren(...cards);
}

function card(state, now) {
  const root = element('div', 'key-card');
  root.setAttribute('data-key', state.key ?? '');
  const breaker = state.breaker?.state ?? 'closed';
  root.setAttribute('data-breaker', breaker);
  const head = element('div', 'key-head');
  const label = element('span', 'key-label', state.label ?? state.key ?? '');
  label.title = state.key ?? '';
  head.append(label);
  const paused = typeof state.pausedUntil === 'number' && state.pausedUntil > now;
  if (paused)
    head.append(
      element('span', 'badge badge-paused', `paused ${duration(state.pausedUntil - now)}`),
    );
  if (breaker !== 'closed') {
    const badge = element('span', `badge badge-breaker-${breaker}`, `breaker ${breaker}`);
    badge.title = [state.breaker.code, state.breaker.message].filter(Boolean).join(': ');
    head.append(badge);
  }
  root.append(head);

  const stats = element('div', 'key-stats');
  stats.append(
    stat('window', count(state.limit)),
    stat('in flight', count(state.inFlight)),
    stat('queued', count(state.queued)),
    stat('admitted', count(state.admitted)),
    stat('429s', count(state.rateLimited), state.rateLimited > 0 ? 'warn' : ''),
    stat('529s', count(state.overloaded), state.overloaded > 0 ? 'warn' : ''),
    stat('refused', percent(state.refusalRate), state.refusalRate > 0.05 ? 'warn' : ''),
  );
  root.append(stats);
  root.append(
    bar('requests', state.requests),
    bar('input tok', state.inputTokens),
    bar('output tok', state.outputTokens),
  );
  if (breaker !== 'closed' && state.breaker?.message) {
    root.append(
      element('div', 'key-message', `${state.breaker.code ?? ''} ${state.breaker.message}`.trim()),
    );
  }
  return root;
}

function stat(name, value, tone = '') {
  const root = element('div', `stat ${tone}`.trim());
  root.append(element('span', 'stat-name', name), element('span', 'stat-value', value));
  return root;
}

/** A limit with its remaining share as a bar; "unknown" when the provider has not said. */
function bar(name, budget) {
  const root = element('div', 'budget');
  root.append(element('span', 'budget-name', name));
  const track = element('span', 'budget-track');
  const fill = element('span', 'budget-fill');
  track.append(fill);
  root.append(track);
  if (!budget || typeof budget.limit !== 'number' || budget.limit <= 0) {
    root.classList.add('unknown');
    root.append(element('span', 'budget-value', 'unknown'));
    return root;
  }
  const remaining = typeof budget.remaining === 'number' ? budget.remaining : budget.limit;
  const share = Math.max(0, Math.min(1, remaining / budget.limit));
  // CSSOM writes are allowed under style-src 'self'; inline style attributes are not.
  fill.style.width = `${(share * 100).toFixed(1)}%`;
  if (share < 0.1) root.classList.add('low');
  else if (share < 0.3) root.classList.add('mid');
  const value = element('span', 'budget-value', `${count(remaining)} / ${count(budget.limit)}`);
  value.title = `${remaining} of ${budget.limit} left (${budget.source ?? 'unknown source'})`;
  root.append(value);
  return root;
}
