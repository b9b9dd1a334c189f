import type { AgentResult } from '../../shared/result.js';
import { outcomeTag } from '../../shared/result.js';
import { safeLabel, safeText } from '../output.js';
import { describeTokens } from './usage-text.js';

/** A readable rendering of one AgentResult for a terminal. */
export function formatResult(result: AgentResult): string {
  const lines: string[] = [];
  const reason = result.reason
    ? ` (${result.code ? `${result.code}: ` : ''}${safeLabel(result.reason)})`
    : '';
  lines.push(`── ${safeLabel(result.title)} · ${result.id} · ${result.outcome}${reason}`);
  // Model text and titles are shown with terminal control characters neutralised.
  if (result.text !== '') lines.push(safeText(result.text));
  else lines.push(safeText(outcomeTag(result)));
  const usage = result.usage;
  lines.push(
    `   ${result.elapsedMs} ms · ${usage.steps} steps · ${usage.providerCalls} provider calls · ` +
      `${describeTokens(usage)}${result.truncated ? ' · clipped' : ''}`,
  );
  // No folder line when the `logs` policy did not keep the folder.
  if (result.logDir !== undefined) {
    const reply = result.replyFile ? ` · reply: ${safeLabel(result.replyFile)}` : '';
    lines.push(`   log: ${safeLabel(result.logDir)}${reply}`);
  }
  return lines.join('\n');
}
