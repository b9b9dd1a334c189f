// The dashboard page: takes the token, opens the event stream, and paints the panels from the
// store at most once per animation frame.

import { Api, takeToken } from './api.js';
import { drawChart } from './chart.js';
import { renderFailures } from './failures.js';
import { count, element, usd } from './format.js';
import { renderGovernor } from './governor.js';
import { Store } from './store.js';
import { TranscriptView } from './transcript.js';
import { TreeView } from './tree.js';

const byId = (id) => document.getElementById(id);

const token = takeToken();
const api = new Api(token);
const store = new Store();

const conn = byId('conn');
const notice = byId('notice');
const chart = byId('chart');

// The chart's size comes from the observer: reading clientWidth in a frame after DOM writes would
// force a layout of the whole page on every delta.
const chartSize = { width: 0, height: 0 };
new ResizeObserver((entries) => {
  const box = entries[entries.length - 1].contentRect;
  chartSize.width = box.width;
  chartSize.height = box.height;
  dirty.chart = true;
  schedule();
}).observe(chart);

const tree = new TreeView({
  scroller: byId('tree'),
  spacer: byId('tree-spacer'),
  store,
  onOpen: (id) => openAgent(id),
  onCancel: (id) => cancelAgent(id),
  onCount: (shown) => {
    byId('tree-count').textContent = `${count(shown)} shown`;
  },
});

const transcript = new TranscriptView({
  panel: byId('transcript'),
  title: byId('transcript-title'),
  body: byId('transcript-body'),
  api,
  onClose: () => tree.select(''),
});

byId('transcript-close').addEventListener('click', () => transcript.close());
byId('transcript-refresh').addEventListener('click', () => transcript.refresh());
document.addEventListener('keydown', (event) => {
  if (event.key === 'Escape' && transcript.id) transcript.close();
});

const filterText = byId('filter-text');
const filterStatus = byId('filter-status');
let filterTimer = 0;
const applyFilter = () => tree.setFilter(filterText.value, filterStatus.value);
filterText.addEventListener('input', () => {
  clearTimeout(filterTimer);
  filterTimer = setTimeout(applyFilter, 120);
});
filterStatus.addEventListener('change', applyFilter);
byId('expand-all').addEventListener('click', () => tree.expandAll(true));
byId('collapse-all').addEventListener('click', () => tree.expandAll(false));

function openAgent(id) {
  tree.select(id);
  if (store.agents.has(id)) tree.reveal(id);
  transcript.open(id);
}

async function cancelAgent(id) {
  try {
    await api.cancel(id);
    say(`cancel sent: ${id}`, false);
  } catch (error) {
    say(`cancel ${id}: ${error?.message ?? error}`, true);
  }
}

let noticeTimer = 0;
function say(text, isError) {
  notice.textContent = text;
  notice.hidden = false;
  notice.classList.toggle('error', isError);
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(
    () => {
      notice.hidden = true;
    },
    isError ? 8000 : 3000,
  );
}

// What changed since the last paint: each panel repaints only when its input did.
const dirty = { header: false, governor: false, chart: false, failures: false };
let frame = 0;

function schedule() {
  if (frame) return;
  frame = requestAnimationFrame(paint);
}

/**
 * Each panel keeps the key of what it last drew and redraws only when the key moves: deltas come
 * four times a second, but the series gains a point every 5 s, and a rebuilt failure list under
 * the pointer would swallow a click.
 */
const drawn = { header: '', governor: '', chart: '', failures: '' };

function changed(panel, key) {
  if (drawn[panel] === key) return false;
  drawn[panel] = key;
  return true;
}

function paint() {
  frame = 0;
  if (dirty.header && changed('header', JSON.stringify([store.run, store.totals]))) paintHeader();
  if (dirty.governor) {
    const now = store.now();
    // A pause or a breaker's probe counts down: its card changes every second on its own.
    const paused = store.governor.some(
      (state) => state.pausedUntil > now || state.breaker?.probeAt > now,
    );
    const key = JSON.stringify(store.governor) + (paused ? Math.floor(now / 1000) : '');
    if (changed('governor', key)) renderGovernor(byId('governor'), store.governor, now);
  }
  if (dirty.chart) {
    const last = store.series[store.series.length - 1];
    const key = JSON.stringify([
      store.series.length,
      last,
      store.limits,
      chartSize.width,
      chartSize.height,
      window.devicePixelRatio,
    ]);
    if (changed('chart', key)) drawChart(chart, store.series, store.limits, chartSize);
  }
  if (dirty.failures && changed('failures', JSON.stringify(store.failures))) {
    renderFailures(byId('failures'), store.failures, openAgent);
  }
  dirty.header = dirty.governor = dirty.chart = dirty.failures = false;
}

function markAll() {
  dirty.header = dirty.governor = dirty.chart = dirty.failures = true;
  schedule();
}

function paintHeader() {
  const run = store.run;
  byId('command').textContent = run ? `${run.command}${run.logDir ? ` · ${run.logDir}` : ''}` : '';
  const totals = store.totals;
  const box = byId('totals');
  if (!totals) {
    box.replaceChildren();
    return;
  }
  const usage = totals.usage ?? {};
  const items = [
    total('agents', count(totals.agents)),
    total('queued', count(totals.queued), 'queued'),
    total('running', count(totals.running), 'running'),
    total('settled', count(totals.settled), 'settled'),
  ];
  for (const [outcome, value] of Object.entries(totals.outcomes ?? {})) {
    if (value) items.push(total(outcome, count(value), outcome));
  }
  items.push(
    total('in', count(usage.inputTokens)),
    total('out', count(usage.outputTokens)),
    total('cache r/w', `${count(usage.cacheReadTokens)}/${count(usage.cacheWriteTokens)}`),
    total('calls', count(usage.providerCalls)),
    total('cost', usd(totals.costUsd)),
  );
  box.replaceChildren(...items);
}

function total(name, value, state) {
  const item = element('span', 'total');
  if (state) {
    const dot = element('span', 'dot');
    dot.setAttribute('data-state', state);
    item.append(dot);
  }
  item.append(element('span', 'total-name', name), element('span', 'total-value', value));
  return item;
}

function setConnection(text) {
  conn.textContent = text;
  conn.setAttribute('data-state', text);
}

/** What of the open transcript's agent its transcript depends on. */
function transcriptMark() {
  const agent = transcript.id ? store.agents.get(transcript.id) : undefined;
  return agent ? `${agent.status} ${agent.outcome ?? ''} ${agent.usage?.steps ?? 0}` : '';
}

// The open transcript follows its agent: refetched when it changes, at most once a second.
let refreshTimer = 0;
function refreshSoon() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => {
    refreshTimer = 0;
    transcript.refresh();
  }, 1000);
}

let ended = false;
let retry = 0;
/** Refused connections in a row: the retry waits 2 s, 4 s, … up to 30 s. */
let refusals = 0;

function connect() {
  api.events({
    open: () => {
      refusals = 0;
      setConnection('live');
    },
    state: (state) => {
      store.replace(state);
      setConnection('live');
      tree.invalidate();
      markAll();
    },
    delta: (delta) => {
      // The open transcript changes only when its own agent commits a step or ends, not when
      // an agent below it does (which changes its row's subtree sums).
      const before = transcriptMark();
      const structure = store.apply(delta);
      if (transcript.id && transcriptMark() !== before) refreshSoon();
      if (structure || tree.filtering) tree.invalidate();
      else tree.schedule();
      markAll();
    },
    end: () => {
      ended = true;
      store.ended = true;
      setConnection('ended');
      // Running rows stop their clocks: repaint once with the final state.
      tree.schedule();
      markAll();
    },
    error: (source) => {
      if (ended) return;
      setConnection('reconnecting');
      // EventSource retries by itself unless the answer was fatal (401, not an event stream).
      if (source.readyState === EventSource.CLOSED) {
        clearTimeout(retry);
        refusals++;
        retry = setTimeout(
          () => {
            if (!ended) connect();
          },
          Math.min(30_000, 1000 * 2 ** Math.min(refusals, 5)),
        );
      }
    },
  });
}

if (!token) {
  setConnection('no token');
  say('open the address the run printed: it carries ?token=…', true);
} else {
  connect();
}

// Elapsed times and pause countdowns move on their own: repaint the rows in view once a second.
setInterval(() => {
  if (ended) return;
  tree.schedule();
  dirty.governor = true;
  schedule();
}, 1000);
