import { defined } from '../shared/option-schema.js';
import type { ContentBlockParam } from '../shared/provider/types.js';
import { type AgentResult, outcomeTag } from '../shared/result.js';

/**
 * Renders pending inbox results as the content of one synthetic user message, in settle order.
 * Each result is its own content block whose first line is a JSON header written by us; the
 * child's text follows a blank line. A child's text can never forge an entry: entries are blocks,
 * and only our header opens one.
 */
export function renderInbox(results: readonly AgentResult[]): ContentBlockParam[] {
  const intro =
    results.length === 1
      ? 'A background agent finished. Its result follows.'
      : `${results.length} background agents finished. Their results follow, in the order they finished.`;
  const blocks: ContentBlockParam[] = [{ type: 'text', text: intro }];
  for (const result of results) {
    const header = {
      kind: 'agent_result',
      id: result.id,
      title: result.title,
      outcome: result.outcome,
      ...defined({ reason: result.reason }),
      ...(result.truncated ? { truncated: true, replyFile: result.replyFile } : {}),
    };
    const body = result.text !== '' ? result.text : outcomeTag(result);
    blocks.push({ type: 'text', text: `${JSON.stringify(header)}\n\n${body}` });
  }
  return blocks;
}
