// The transcript drawer: one agent's committed history from GET /api/agents/ID.

import { count, element, tokensOf, usd } from './format.js';

const TEXT_CLIP = 4000;
const INPUT_CLIP = 400;
const RESULT_CLIP = 1200;

export class TranscriptView {
  #panel;
  #title;
  #body;
  #api;
  #id = '';
  #request = undefined;
  #onClose;

  /** @param {{ panel: HTMLElement, title: HTMLElement, body: HTMLElement, api: import('./api.js').Api, onClose: () => void }} options */
  constructor(options) {
    this.#panel = options.panel;
    this.#title = options.title;
    this.#body = options.body;
    this.#api = options.api;
    this.#onClose = options.onClose;
  }

  get id() {
    return this.#id;
  }

  async open(id) {
    this.#id = id;
    this.#request?.abort();
    const request = new AbortController();
    this.#request = request;
    this.#panel.hidden = false;
    this.#panel.setAttribute('data-id', id);
    this.#title.textContent = id;
    if (this.#body.childElementCount === 0 || this.#body.getAttribute('data-id') !== id) {
      this.#body.replaceChildren(element('div', 'empty-note', 'loading…'));
    }
    try {
      const answer = await this.#api.agent(id, request.signal);
      if (request.signal.aborted) return;
      this.#render(answer);
    } catch (error) {
      if (request.signal.aborted) return;
      this.#body.replaceChildren(element('div', 'error-note', String(error?.message ?? error)));
    }
  }

  refresh() {
    if (this.#id) this.open(this.#id);
  }

  close() {
    this.#request?.abort();
    this.#id = '';
    this.#panel.hidden = true;
    this.#panel.removeAttribute('data-id');
    this.#body.replaceChildren();
    this.#body.removeAttribute('data-id');
    this.#onClose();
  }

  #render(answer) {
    const agent = answer?.agent ?? {};
    const transcript = answer?.transcript;
    this.#title.textContent = agent.title ? `${agent.title}` : (agent.id ?? this.#id);
    this.#body.setAttribute('data-id', this.#id);
    const nodes = [summary(agent, transcript)];
    if (!transcript) {
      nodes.push(
        element(
          'div',
          'empty-note',
          'no transcript: the run keeps no journal, or this agent has written nothing yet',
        ),
      );
    } else {
      // A tool_result names only its tool_use's id: carry the names over to label results.
      const tools = new Map();
      for (const message of transcript.messages ?? []) nodes.push(messageNode(message, tools));
      if (transcript.result) nodes.push(resultNode(transcript.result));
    }
    this.#body.replaceChildren(...nodes);
  }
}

function summary(agent, transcript) {
  const root = element('div', 'tx-summary');
  const state = agent.status === 'settled' ? (agent.outcome ?? 'settled') : (agent.status ?? '');
  const dot = element('span', 'dot');
  dot.setAttribute('data-state', state);
  const parts = [
    ['id', agent.id],
    ['status', state],
    ['parent', agent.parent ?? '–'],
    ['depth', agent.depth],
    ['tokens', count(tokensOf(agent.usage))],
    ['cost', usd(agent.costUsd)],
    [
      'subtree',
      agent.subtree
        ? `${count(agent.subtree.agents)} agents · ${count(agent.subtree.tokens)} tok · ${usd(agent.subtree.costUsd)}`
        : '–',
    ],
    ['calls', count(agent.usage?.providerCalls)],
    ['steps', count(transcript?.steps ?? agent.usage?.steps)],
  ];
  root.append(dot);
  for (const [name, value] of parts) {
    const item = element('span', 'tx-field');
    item.append(
      element('span', 'tx-name', name),
      element('span', 'tx-value', String(value ?? '–')),
    );
    root.append(item);
  }
  if (agent.reason) {
    root.append(
      element('div', 'tx-reason', `${agent.code ? `${agent.code}: ` : ''}${agent.reason}`),
    );
  }
  return root;
}

function messageNode(message, tools) {
  const role = message?.role ?? 'unknown';
  const root = element(
    'div',
    `msg msg-${role === 'user' || role === 'assistant' ? role : 'other'}`,
  );
  root.append(element('div', 'msg-role', role));
  const content = message?.content;
  if (typeof content === 'string') {
    root.append(element('pre', 'blk-text', clip(content, TEXT_CLIP)));
    return root;
  }
  for (const block of Array.isArray(content) ? content : []) root.append(blockNode(block, tools));
  return root;
}

function blockNode(block, tools) {
  switch (block?.type) {
    case 'text':
      return element('pre', 'blk-text', clip(block.text ?? '', TEXT_CLIP));
    case 'thinking':
      return element('pre', 'blk-thinking', clip(block.thinking ?? '', TEXT_CLIP));
    case 'tool_use': {
      if (block.id) tools.set(block.id, block.name ?? 'tool');
      const root = element('div', 'blk-tool-use');
      root.append(element('span', 'tool-name', `→ ${block.name ?? 'tool'}`));
      root.append(element('code', 'tool-input', clip(compact(block.input), INPUT_CLIP)));
      return root;
    }
    case 'tool_result': {
      const root = element('div', block.is_error ? 'blk-tool-result is-error' : 'blk-tool-result');
      const name = tools.get(block.tool_use_id) ?? 'tool';
      root.append(element('span', 'tool-name', block.is_error ? `← ${name} (error)` : `← ${name}`));
      root.append(element('pre', 'tool-output', clip(resultText(block.content), RESULT_CLIP)));
      return root;
    }
    default:
      return element('div', 'blk-other', `[${block?.type ?? 'block'}]`);
  }
}

function resultText(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return content === undefined ? '' : compact(content);
  return content
    .map((part) => (part?.type === 'text' ? (part.text ?? '') : `[${part?.type ?? 'block'}]`))
    .join('\n');
}

function resultNode(result) {
  const outcome = result.outcome ?? 'result';
  const root = element('div', `tx-result outcome-${outcome}`);
  const dot = element('span', 'dot');
  dot.setAttribute('data-state', outcome);
  root.append(dot, element('span', 'tx-outcome', outcome));
  const reason = result.reason;
  if (reason) root.append(element('span', 'tx-result-reason', clip(String(reason), RESULT_CLIP)));
  const code = result.code;
  if (code) root.append(element('span', 'tx-result-code', String(code)));
  const text = typeof result.text === 'string' ? result.text : '';
  if (text) root.append(element('pre', 'blk-text tx-result-text', clip(text, TEXT_CLIP)));
  return root;
}

function compact(value) {
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return String(value);
  }
}

function clip(text, limit) {
  return text.length > limit
    ? `${text.slice(0, limit)}… (${count(text.length - limit)} more chars)`
    : text;
}
