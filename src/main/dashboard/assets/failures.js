// Failures by code: each code with its count, each reason with its count and up to five agents.

import { count, element } from './format.js';

/** Renders `groups` into `container` (#failures); `onOpen(id)` opens an agent's transcript. */
export function renderFailures(container, groups, onOpen) {
  const items = [];
  for (const group of groups ?? []) {
    const root = element('div', 'failure');
    root.setAttribute('data-code', group.code ?? '');
    const head = element('div', 'failure-head');
    head.append(
      element('span', 'failure-code', group.code ?? 'unknown'),
      element('span', 'failure-count', count(group.count)),
    );
    root.append(head);
    for (const reason of group.reasons ?? []) {
      const line = element('div', 'reason');
      const full = reason.reason ?? '';
      const text = element(
        'span',
        'reason-text',
        full.length > 300 ? `${full.slice(0, 300)}…` : full,
      );
      text.title = full;
      line.append(element('span', 'reason-count', `×${count(reason.count)}`), text);
      const agents = element('div', 'reason-agents');
      for (const id of (reason.agents ?? []).slice(0, 5)) {
        const link = element('button', 'agent-link', id);
        link.type = 'button';
        link.setAttribute('data-agent', id);
        link.addEventListener('click', () => onOpen(id));
        agents.append(link);
      }
      line.append(agents);
      root.append(line);
    }
    items.push(root);
  }
  if (items.length === 0) items.push(element('div', 'empty-note', 'no failures'));
  container.replaceChildren(...items);
}
