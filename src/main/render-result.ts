import type { AgentResult } from '../shared/result.js';
import { outcomeTag } from '../shared/result.js';

/** A readable rendering of one AgentResult for a terminal. */
export function formatResult(result: AgentResult): string {
  const lines: string[] = [];
  const reason = result.reason ? ` (${result.reason})` : '';
  lines.push(`── ${result.title} · ${result.id} · ${result.outcome}${reason}`);
  if (result.text !== '') lines.push(result.text);
  else lines.push(outcomeTag(result));
  const usage = result.usage;
  lines.push(
    `   ${result.elapsedMs} ms · ${usage.steps} steps · ${usage.providerCalls} provider calls · ` +
      `${usage.inputTokens} in / ${usage.outputTokens} out tokens${result.truncated ? ' · clipped' : ''}`,
  );
  lines.push(`   log: ${result.logDir}${result.replyFile ? ` · reply: ${result.replyFile}` : ''}`);
  return lines.join('\n');
}
