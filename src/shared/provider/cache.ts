import { createHash } from 'node:crypto';
import type Anthropic from '@anthropic-ai/sdk';
import { minimumCacheable } from './cache-minimums.js';
import { sizeOf, tokensOf } from './request-size.js';
import type { ContentBlockParam, MessageParam, ProviderRequest, ToolParam } from './types.js';

/** Whether requests carry prompt-cache breakpoints (docs/CACHING.md). */
export type CacheMode = 'auto' | 'off';
export const CACHE_MODES: readonly CacheMode[] = ['auto', 'off'];

/** How long the shared prefix's cache entry lives after its last use. */
export type CacheTtl = '5m' | '1h';
export const CACHE_TTLS: readonly CacheTtl[] = ['5m', '1h'];

export const DEFAULT_CACHE_MODE: CacheMode = 'auto';
export const DEFAULT_CACHE_TTL: CacheTtl = '5m';

/** A request's cache settings: its spawn's, its agent file's, its task line's or its engine's. */
export interface CacheSettings {
  mode: CacheMode;
  ttl: CacheTtl;
}

type CacheControl = Anthropic.CacheControlEphemeral;
type SystemBlock = Anthropic.TextBlockParam;

/** What the request builder sends, with the breakpoints in place. */
export interface CachedParts {
  system?: string | SystemBlock[];
  tools: ToolParam[];
  messages: MessageParam[];
}

/** The prefix an agent's first request shares with its siblings, for warm-then-release. */
export interface SharedPrefix {
  /** A hash of the model and the prefix's content: equal for every sibling that shares it. */
  key: string;
  /** Its tokens, as the client estimates them. */
  tokens: number;
  /** Its cache entry's lifetime after each use, in ms. */
  ttlMs: number;
}

export interface CachePlan {
  parts: CachedParts;
  /** Set on an agent's first request when its shared prefix is long enough to cache. */
  shared?: SharedPrefix;
  /**
   * Tokens the request should read back from its own earlier steps (the conversation up to the
   * previous step's breakpoint, with the static prefix): what the governor does not charge.
   */
  history: number;
  /** The request's whole input, estimated as `estimateInputTokens` does (measured once). */
  inputTokens: number;
}

/** Blocks the API lets carry `cache_control` (not thinking blocks). */
const MARKABLE = new Set(['text', 'image', 'document', 'tool_use', 'tool_result', 'search_result']);

/**
 * Places the breakpoints of one request (at most 3 of the API's 4):
 * 1. the static prefix: the last system block, else the last tool; every sibling sends these
 *    byte for byte the same, so one entry serves them all;
 * 2. a shared first message: when the first user message has several blocks (a `preamble`, then
 *    the prompt), after all but its last block;
 * 3. the end of the conversation, moving each step, so the agent's own history is read back.
 * None goes on a prefix below the model's minimum. The shared prefixes take `ttl`; the moving one
 * keeps the 5-minute lifetime (a later one-hour breakpoint after it would be refused). The
 * transcript is never changed: marked messages and blocks are copies.
 */
export function planCache(request: ProviderRequest, model: string, ttl: CacheTtl): CachePlan {
  const { messages, tools } = request;
  const system = request.system;
  const minimum = minimumCacheable(model);
  const toolsChars = tools.length === 0 ? 0 : sizeOf(tools);
  const staticTokens = tokensOf(toolsChars + (system?.length ?? 0));
  const shared: CacheControl = ttl === '1h' ? { type: 'ephemeral', ttl: '1h' } : EPHEMERAL;
  const parts: CachedParts = { tools, messages };
  if (system !== undefined) parts.system = system;

  const staticMarked = staticTokens >= minimum && (system !== undefined || tools.length > 0);
  if (staticMarked) {
    if (system !== undefined) {
      parts.system = [{ type: 'text', text: system, cache_control: shared }];
    } else {
      const last = tools.at(-1) as ToolParam;
      parts.tools = [...tools.slice(0, -1), { ...last, cache_control: shared }];
    }
  }

  // Characters of the conversation before each message, to place the later breakpoints.
  let characters = toolsChars + (system?.length ?? 0);
  const out = messages.slice();
  const first = messages[0];
  let sharedTokens = staticMarked ? staticTokens : 0;
  if (first && Array.isArray(first.content) && first.content.length > 1) {
    const lead = first.content.slice(0, -1);
    const leadTokens = tokensOf(characters + JSON.stringify(lead).length);
    const at = lead.length - 1;
    if (leadTokens >= minimum && MARKABLE.has((lead[at] as ContentBlockParam).type)) {
      out[0] = { ...first, content: markBlock(first.content, at, shared) } as MessageParam;
      sharedTokens = leadTokens;
    }
  }

  // The moving breakpoint, on the last block of the last message.
  let history = 0;
  for (let index = 0; index < messages.length - 1; index++) {
    // The previous step's breakpoint was at the end of the message two before the last.
    if (index === messages.length - 2 && index > 0) history = tokensOf(characters);
    characters += sizeOf(messages[index] as object);
  }
  // The last message is measured afresh: a session may still append to it.
  const lastMessage = messages.at(-1);
  if (lastMessage !== undefined) characters += JSON.stringify(lastMessage).length;
  if (history < minimum) history = 0;
  const total = tokensOf(characters);
  const lastIndex = out.length - 1;
  const last = out[lastIndex];
  if (last !== undefined && total >= minimum) {
    const content = last.content;
    if (typeof content === 'string') {
      if (content !== '') {
        out[lastIndex] = {
          ...last,
          content: [{ type: 'text', text: content, cache_control: EPHEMERAL }],
        };
      }
    } else if (content.length > 0) {
      const at = content.length - 1;
      // The last block: after a shared lead's breakpoint, never on it.
      const block = content[at] as ContentBlockParam;
      if (MARKABLE.has(block.type)) {
        out[lastIndex] = { ...last, content: markBlock(content, at, EPHEMERAL) } as MessageParam;
      }
    }
  }
  parts.messages = out;

  const plan: CachePlan = { parts, history, inputTokens: Math.max(1, total) };
  if (messages.length === 1 && sharedTokens > 0) {
    plan.shared = {
      key: prefixKey(model, system, parts),
      tokens: sharedTokens,
      ttlMs: ttl === '1h' ? 3_600_000 : 300_000,
    };
  }
  return plan;
}

const EPHEMERAL: CacheControl = { type: 'ephemeral' };

function markBlock(
  content: readonly ContentBlockParam[],
  at: number,
  control: CacheControl,
): ContentBlockParam[] {
  const copy = content.slice();
  copy[at] = { ...(content[at] as ContentBlockParam), cache_control: control } as ContentBlockParam;
  return copy;
}

/** The last shared prefix named on this thread: siblings mostly share one, so its hash is kept. */
let lastPrefix: { text: string[]; key: string } | undefined;

/**
 * The shared prefix's identity: the model, the tools, the system and the first message's lead.
 * Only an agent's first request computes it, and only when the prefix is cacheable; the hash of an
 * 80 KB system prompt is made once per distinct prefix, not once per agent (comparing the text
 * costs a fraction of hashing it).
 */
function prefixKey(model: string, system: string | undefined, parts: CachedParts): string {
  const first = parts.messages[0]?.content;
  const text = [
    model,
    JSON.stringify(parts.tools),
    system ?? '',
    Array.isArray(first) && first.length > 1 ? JSON.stringify(first.slice(0, -1)) : '',
  ];
  const last = lastPrefix;
  if (last?.text.every((part, index) => part === text[index])) return last.key;
  const hash = createHash('sha256');
  for (const part of text) hash.update(part).update('\0');
  const key = hash.digest('hex').slice(0, 32);
  lastPrefix = { text, key };
  return key;
}
