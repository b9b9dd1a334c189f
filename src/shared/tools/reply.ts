import { defined } from '../option-schema.js';
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

/** The block appended to every child's system prompt (README, "The contracts": delivery discipline). */
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

/** The `reply` input schema of an agent whose reply must match `outputSchema` (a typed reply). */
export function typedReplySchema(outputSchema: Record<string, unknown>): InputSchema {
  // Its definitions go to the top as well, so `#/definitions/…` and `#/$defs/…` still resolve
  // in the nested copy (output-schema.ts refuses any other document-relative `$ref`).
  const { definitions, $defs } = outputSchema;
  return defined({
    type: 'object' as const,
    properties: { result: outputSchema },
    required: ['result'],
    additionalProperties: false,
    definitions,
    $defs: Array.isArray($defs) ? undefined : $defs,
  });
}

export const TYPED_REPLY_DESCRIPTION =
  'Return your result to the parent agent and finish. `result` must match the JSON Schema of ' +
  'this tool exactly: it is parsed, not read. A result that does not match is refused with the ' +
  'reason, and you may call `reply` again with a corrected one. Any other tool calls in the ' +
  'same message still run; after an accepted reply this agent stops.';

/** How a refused typed reply's tool result starts (restore counts them by it). */
export const BAD_REPLY_PREFIX = 'Reply refused: `result` does not match the output schema';

/** The answer to a second matching reply in one batch: only the first is taken. */
export const EXTRA_REPLY_TEXT = 'A reply was already accepted in this batch; this one was ignored.';
