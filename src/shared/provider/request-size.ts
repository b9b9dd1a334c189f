import type { ProviderRequest } from './types.js';

/** Characters per token the client assumes; the governor learns the real ratio from responses. */
export const CHARS_PER_TOKEN = 4;

// A message's size, kept per object: a transcript only grows, so each attempt measures only the
// messages it has not seen before.
const sizes = new WeakMap<object, number>();

/** The length of `value` as JSON, remembered for objects that do not change (past messages). */
export function sizeOf(value: object): number {
  let size = sizes.get(value);
  if (size === undefined) {
    size = JSON.stringify(value).length;
    sizes.set(value, size);
  }
  return size;
}

/** Characters to tokens, as the client estimates them. */
export function tokensOf(characters: number): number {
  return Math.ceil(characters / CHARS_PER_TOKEN);
}

/**
 * The request's input tokens, estimated from its size, for the governor's admission and the
 * cache's minimums. The last message is measured afresh each time: a session may still append to
 * it.
 */
export function estimateInputTokens(request: ProviderRequest): number {
  const { messages } = request;
  let characters = (request.system?.length ?? 0) + sizeOf(request.tools);
  for (let index = 0; index < messages.length - 1; index++) {
    characters += sizeOf(messages[index] as object);
  }
  const last = messages.at(-1);
  if (last !== undefined) characters += JSON.stringify(last).length;
  return Math.max(1, tokensOf(characters));
}
