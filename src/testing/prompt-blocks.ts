/**
 * The prompt of a request as prompt caching sees it: a run of blocks, in the order the real
 * API caches them. First each tool definition, then the system prompt (a string is one block,
 * an array of text blocks one block each), then each content block of each message (a string
 * content is one block). For every block the walk measures the characters of the request's
 * JSON up to its end, `cache_control` fields left out, which is what the input-token estimate
 * of its prefix is made of, and, when the cache is on, finds the `cache_control` breakpoints
 * and hashes each prefix.
 *
 * The hashes are chained, one pass over the request: one running sha256 takes in each block
 * in turn (the role it stands in, then its JSON without `cache_control`), and the digest of
 * the prefix that ends with block i is that hash's state after block i. So a long system
 * prompt is hashed once per request, however many breakpoints follow it, and moving a
 * breakpoint changes no prefix's digest.
 */
import { createHash, type Hash } from 'node:crypto';
import { isRecord } from './is-record.js';
import type { RequestBlock, RequestMessage } from './messages-api.js';
import { RequestProblem } from './request-problem.js';

/** A cache entry's lifetime: `cache_control.ttl`, 5 minutes by default. */
export type CacheTtl = '5m' | '1h';

/** The real API's limit on blocks with `cache_control`, the request's top-level one included. */
export const MAX_BREAKPOINTS = 4;

/** A point where a cacheable prefix ends: the end of a block that carries `cache_control`. */
export interface CacheBreakpoint {
  /** The index of the block the prefix ends with. */
  block: number;
  ttl: CacheTtl;
}

/** What the cache needs of a request's prompt, per block, in prompt order. */
export interface PromptBlocks {
  /** Characters of the request's JSON up to the end of each block (see `measurePrompt`). */
  endChars: number[];
  /** Media tokens (images and documents) of the blocks up to and including each. */
  endMedia: number[];
  /** The chained digest of the prefix that ends with each block. */
  digests: string[];
  /** One per block that closes a prefix, in prompt order; when breakpoints share a block, `1h` wins. */
  breakpoints: CacheBreakpoint[];
}

/**
 * How much of the walk to do: `count` measures characters only; `check` also refuses what the
 * real API refuses about breakpoints (more than 4, a `1h` after a `5m`); `hash` also hashes
 * every prefix and returns the blocks for the cache.
 */
export type PromptWork = 'count' | 'check' | 'hash';

/** The parts of a request body the walk reads, as sent (and checked). */
export interface PromptParts {
  tools: unknown;
  system: unknown;
  messages: readonly unknown[];
  /** The request's top-level `cache_control`: one more breakpoint, at the last block. */
  cacheControl: unknown;
}

export interface MeasuredPrompt {
  /**
   * Characters of the JSON of `tools`, `system` and `messages` as sent, without their
   * `cache_control` fields (which are no part of the prompt: moving a breakpoint changes no
   * prefix's count) and without the JSON of images and documents (a tool_result's included),
   * which are charged media tokens instead. Without either it is exactly the length of their
   * `JSON.stringify`.
   */
  inputChars: number;
  /** With `work: "hash"`. */
  prompt?: PromptBlocks;
}

/** `{"role":` + the role's two quotes + `,"content":`: a message before its content. */
const MESSAGE_HEAD_CHARS = 21;

/** A `cache_control` found in the walk, and where. */
interface Found {
  control: Record<string, unknown>;
  path: string;
}

/**
 * Walks the prompt of a checked request. `given` is the checked messages before merging, one
 * per message of `parts.messages`, with one block per content block as sent: it says which
 * blocks are images or documents and what they cost. Throws RequestProblem, under `check` and
 * `hash`, for more than 4 breakpoints or a `1h` breakpoint after a `5m` one.
 */
export function measurePrompt(
  parts: PromptParts,
  given: readonly RequestMessage[],
  work: PromptWork,
): MeasuredPrompt {
  const walk = new PromptWalk(work);
  const { tools, system, messages } = parts;
  if (Array.isArray(tools)) {
    walk.list(tools, (tool, index) => walk.block(tool, 't', `tools.${index}`, false));
  } else if (tools !== undefined) {
    walk.chars += JSON.stringify(tools).length;
  }
  if (typeof system === 'string') walk.block(system, 's', 'system', false);
  else if (Array.isArray(system)) {
    walk.list(system, (block, index) => walk.block(block, 's', `system.${index}`, false));
  }
  walk.list(messages, (raw, index) => {
    const message = raw as { role: string; content: unknown };
    // A message's only keys are role and content; its closing brace follows its content.
    walk.chars += MESSAGE_HEAD_CHARS + message.role.length;
    const tag = message.role === 'user' ? 'u' : 'a';
    const path = `messages.${index}.content`;
    const { content } = message;
    if (Array.isArray(content)) {
      const checked = given[index]?.blocks ?? [];
      walk.list(content, (block, blockIndex) => {
        walk.block(block, tag, `${path}.${blockIndex}`, true, checked[blockIndex]);
      });
    } else {
      walk.block(content, tag, path, false);
    }
    walk.chars += 1;
  });
  return work === 'count' ? { inputChars: walk.chars } : walk.finish(parts.cacheControl);
}

class PromptWalk {
  readonly #work: PromptWork;
  /** Characters so far; the walk adds brackets, commas and message wrappers here itself. */
  chars = 0;
  #media = 0;
  /** The running hash of the prefix so far, with `work: "hash"`. */
  readonly #hash: Hash | undefined;
  readonly #endChars: number[] = [];
  readonly #endMedia: number[] = [];
  readonly #digests: string[] = [];
  /** Each breakpoint found, with its block, in prompt order. */
  readonly #found: Array<Found & { block: number }> = [];

  constructor(work: PromptWork) {
    this.#work = work;
    this.#hash = work === 'hash' ? createHash('sha256') : undefined;
  }

  /** A JSON array: its brackets and commas, each where it stands, and `each` of its items. */
  list(items: readonly unknown[], each: (item: unknown, index: number) => void): void {
    this.chars += 1;
    items.forEach((item, index) => {
      if (index > 0) this.chars += 1;
      each(item, index);
    });
    this.chars += 1;
  }

  /**
   * One block: `tag` names where it stands (tool, system, user, assistant); `nested` looks
   * for `cache_control` inside a message block (a tool_result's, a search result's or a
   * content document's blocks); `checked` is its checked form, which says what media it holds.
   */
  block(value: unknown, tag: string, path: string, nested: boolean, checked?: RequestBlock): void {
    const media = mediaTokensOf(checked);
    const found: Found[] = [];
    const stripped = isRecord(value) ? strip(value, path, found, nested) : value;
    const json = media === undefined || this.#work === 'hash' ? JSON.stringify(stripped) : '';
    this.chars += media === undefined ? json.length : mediaFreeChars(stripped);
    if (this.#work === 'count') return;
    this.#media += media ?? 0;
    const index = this.#endChars.length;
    for (const one of found) this.#found.push({ ...one, block: index });
    this.#endChars.push(this.chars);
    this.#endMedia.push(this.#media);
    const hash = this.#hash;
    if (hash !== undefined) {
      // The tag, a letter, cannot be mistaken for the start of a block's JSON, so no two
      // runs of blocks feed the hash the same text.
      hash.update(tag).update(json);
      this.#digests.push(hash.copy().digest('base64'));
    }
  }

  /** Adds the top-level breakpoint, checks the breakpoints as the real API does, and returns. */
  finish(cacheControl: unknown): MeasuredPrompt {
    const found = this.#found;
    const last = this.#endChars.length - 1;
    if (isRecord(cacheControl) && last >= 0) {
      found.push({ control: cacheControl, path: 'cache_control', block: last });
    }
    if (found.length > MAX_BREAKPOINTS) {
      throw new RequestProblem(
        `A maximum of ${MAX_BREAKPOINTS} blocks with cache_control may be provided. Found ${found.length}.`,
      );
    }
    const breakpoints: CacheBreakpoint[] = [];
    let first5m: string | undefined;
    for (const { control, path, block } of found) {
      const ttl: CacheTtl = control.ttl === '1h' ? '1h' : '5m';
      if (ttl === '5m') first5m ??= path;
      else if (first5m !== undefined) {
        throw new RequestProblem(
          `A cache_control with ttl '1h' must come before any with ttl '5m' in the prompt (tools, then system, then messages): found one at \`${path}\`, after the '5m' one at \`${first5m}\``,
        );
      }
      const previous = breakpoints[breakpoints.length - 1];
      if (previous?.block === block) {
        if (ttl === '1h') previous.ttl = ttl;
      } else {
        breakpoints.push({ block, ttl });
      }
    }
    if (this.#work !== 'hash') return { inputChars: this.chars };
    return {
      inputChars: this.chars,
      prompt: {
        endChars: this.#endChars,
        endMedia: this.#endMedia,
        digests: this.#digests,
        breakpoints,
      },
    };
  }
}

/** The media tokens a checked block carries (an image, a document, a tool_result's), if any. */
function mediaTokensOf(block: RequestBlock | undefined): number | undefined {
  if (block === undefined) return undefined;
  if (block.type === 'image' || block.type === 'document') return block.tokens;
  if (block.type !== 'tool_result' || !Array.isArray(block.content)) return undefined;
  let tokens: number | undefined;
  for (const part of block.content) {
    if (part.type !== 'text') tokens = (tokens ?? 0) + part.tokens;
  }
  return tokens;
}

function isMedia(value: unknown): boolean {
  return isRecord(value) && (value.type === 'image' || value.type === 'document');
}

/** A block's characters without its media: none for an image or document itself. */
function mediaFreeChars(value: unknown): number {
  if (!isRecord(value) || isMedia(value)) return 0;
  const content = value.content as unknown[];
  return JSON.stringify({ ...value, content: content.filter((part) => !isMedia(part)) }).length;
}

/**
 * `block` without its `cache_control` (and, `nested`, without those of the blocks inside it),
 * copied only where one was taken out; the ones that are not null go to `found`, inner ones
 * first, as they come first in the prompt.
 */
function strip(
  block: Record<string, unknown>,
  path: string,
  found: Found[],
  nested: boolean,
): Record<string, unknown> {
  let value = block;
  if (nested) {
    const { type, content, source } = block;
    if ((type === 'tool_result' || type === 'search_result') && Array.isArray(content)) {
      const inner = stripParts(content, `${path}.content`, found);
      if (inner !== content) value = { ...block, content: inner };
    } else if (type === 'document' && isRecord(source) && Array.isArray(source.content)) {
      const inner = stripParts(source.content, `${path}.source.content`, found);
      if (inner !== source.content) value = { ...block, source: { ...source, content: inner } };
    }
  }
  const control = block.cache_control;
  if (control === undefined) return value;
  if (isRecord(control)) found.push({ control, path: `${path}.cache_control` });
  const { cache_control: _, ...rest } = value;
  return rest;
}

/** `parts` with each block stripped, the same array if none had a `cache_control`. */
function stripParts(parts: unknown[], path: string, found: Found[]): unknown[] {
  let copy: unknown[] | undefined;
  parts.forEach((part, index) => {
    if (!isRecord(part)) return;
    const stripped = strip(part, `${path}.${index}`, found, true);
    if (stripped === part) return;
    copy ??= parts.slice();
    copy[index] = stripped;
  });
  return copy ?? parts;
}
