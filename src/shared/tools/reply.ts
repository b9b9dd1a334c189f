import type { InputSchema } from './types.js';

export const REPLY_DESCRIPTION =
  'Return your result to the parent agent and finish. The parent receives only the `result` ' +
  'argument: put your complete deliverable in it (markdown text, or a JSON object or array). ' +
  'Any other tool calls in the same message still run; after that this agent stops.';

export const REPLY_SCHEMA: InputSchema = {
  type: 'object',
  properties: { result: {} },
  required: ['result'],
};

/** The block appended to every child's system prompt (DESIGN §1.2, delivery discipline). */
export const DELIVERY_DISCIPLINE = [
  '## Delivering your result',
  'Your parent sees only the argument of the `reply` tool, nothing else you write.',
  'When your work is done, call `reply` once with your complete deliverable as `result`.',
  'Any prose you write outside `reply` is discarded.',
].join('\n');

/** The one nudge a child gets when a step ends with no tool call and no reply. */
export const NUDGE_TEXT =
  'Your parent receives only what you pass to the `reply` tool, and you have not called it. ' +
  'Call `reply` now with your complete result.';

export const REPLY_ACK = 'Reply recorded. This agent finishes when this batch of tool calls ends.';
