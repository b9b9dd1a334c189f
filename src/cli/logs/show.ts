/**
 * `cohort logs show ID`: one agent's transcript from the run journal, for a person to read (its
 * meta, the prompt, each step's text, calls and their results, the reply and the outcome), or
 * its AgentHistory as one JSON object.
 */
import type { AgentHistory } from '../../shared/journal/reader.js';
import type { MessageParam } from '../../shared/provider/types.js';
import { redactSecrets } from '../../shared/redact.js';
import { outcomeTag } from '../../shared/result.js';
import { safeLabel, safeText } from '../output.js';
import { describeSaving, describeTokens } from '../views/usage-text.js';
import { type CallOf, clipText, compactJson, type Piece, pieces } from './blocks.js';
import type { RunInfo } from './runs.js';

/** How much of a tool's input and of its result a step shows. */
const INPUT_CHARS = 200;
const RESULT_LINES = 8;
const RESULT_CHARS = 600;
const THINKING_CHARS = 300;

/** `show --json`: the history as the reader made it, one line. */
export function historyJson(history: AgentHistory): string {
  return redactSecrets(JSON.stringify(history));
}

/** The readable transcript of `history`, found in `run`, ending in a newline. */
export function renderHistory(history: AgentHistory, run: RunInfo): string {
  const out: string[] = [];
  const meta = history.meta ?? {};
  const title = typeof meta.title === 'string' ? meta.title : history.result?.title;
  const outcome = history.result?.outcome ?? 'no result';
  out.push(`── ${history.id}${title === undefined ? '' : ` · ${safeLabel(title)}`} · ${outcome}`);
  out.push(...metaLines(history, run));
  if (history.corrupt) {
    out.push('   a record of this agent did not parse: what follows it is not trusted');
  }
  out.push(...transcriptLines(history.messages));
  out.push(...resultLines(history));
  return `${redactSecrets(out.join('\n'))}\n`;
}

function metaLines(history: AgentHistory, run: RunInfo): string[] {
  const meta = history.meta ?? {};
  const lines = [`   run ${safeLabel(run.id)} (${safeLabel(run.dir)})`];
  const about = [
    typeof meta.model === 'string' ? `model ${safeLabel(meta.model)}` : undefined,
    typeof meta.baseURL === 'string' ? `at ${safeLabel(meta.baseURL)}` : undefined,
    typeof meta.agent === 'string' ? `agent file ${safeLabel(meta.agent)}` : undefined,
    typeof meta.depth === 'number' ? `depth ${meta.depth}` : undefined,
    typeof meta.generation === 'number' ? `generation ${meta.generation}` : undefined,
    typeof meta.maxSteps === 'number' ? `max ${meta.maxSteps} steps` : undefined,
  ].filter((part) => part !== undefined);
  if (about.length > 0) lines.push(`   ${about.join(' · ')}`);
  if (Array.isArray(meta.tools)) {
    lines.push(
      `   tools: ${meta.tools.length === 0 ? 'none but reply' : safeLabel(meta.tools.join(', '))}`,
    );
  }
  if (meta.budget !== undefined)
    lines.push(`   budget: ${safeLabel(compactJson(meta.budget, 200))}`);
  const times = [
    history.startedAt === undefined ? undefined : `started ${iso(history.startedAt)}`,
    history.endedAt === undefined ? undefined : `ended ${iso(history.endedAt)}`,
  ].filter((part) => part !== undefined);
  if (times.length > 0) lines.push(`   ${times.join(' · ')}`);
  if (history.inc > 0) {
    const from = typeof meta.resumedAtStep === 'number' ? ` from step ${meta.resumedAtStep}` : '';
    lines.push(
      `   resumed on a fresh worker ${history.inc} time(s); this is its latest run${from}`,
    );
  }
  return lines;
}

/** The prompt, then a section per step: its text and calls, then the results that answer them. */
function transcriptLines(messages: readonly MessageParam[]): string[] {
  const lines: string[] = [];
  const calls = new Map<string, CallOf>();
  let step = 0;
  messages.forEach((message, index) => {
    if (index === 0 && message.role === 'user') {
      lines.push('', '── prompt');
      lines.push(...pieces(message).map((piece) => pieceText(piece, calls, 'prompt')));
      return;
    }
    if (message.role === 'assistant') {
      step++;
      lines.push('', `── step ${step}`);
    }
    for (const piece of pieces(message)) {
      if (piece.kind === 'call') calls.set(piece.call.id, piece.call);
      lines.push(pieceText(piece, calls, message.role));
    }
  });
  return lines;
}

function pieceText(piece: Piece, calls: Map<string, CallOf>, role: string): string {
  switch (piece.kind) {
    case 'text':
      // What the model wrote is shown whole; what answered it (a nudge, a delivery) is marked.
      return role === 'assistant' || role === 'prompt'
        ? safeText(piece.text)
        : `  user: ${indent(safeText(piece.text))}`;
    case 'thinking':
      return `  (thinking) ${indent(safeText(clipText(piece.text, RESULT_LINES, THINKING_CHARS)))}`;
    case 'call':
      return `  → ${safeLabel(piece.call.name)} ${safeLabel(compactJson(piece.call.input, INPUT_CHARS))}`;
    case 'result': {
      const name = calls.get(piece.toolUseId)?.name ?? piece.toolUseId;
      const text = clipText(piece.text, RESULT_LINES, RESULT_CHARS);
      return `  ← ${safeLabel(name)}${piece.error ? ' ✗' : ''}: ${indent(safeText(text))}`;
    }
    case 'other':
      return `  [${safeLabel(piece.type)}]`;
  }
}

/** Further lines of a block start under its first, past the arrow (blank ones stay blank). */
function indent(text: string): string {
  return text.replace(/\n(?!\n|$)/g, '\n    ');
}

function resultLines(history: AgentHistory): string[] {
  const result = history.result;
  if (!result) {
    return ['', '── no result: the agent was still running, or its process died first'];
  }
  const lines = [''];
  const full = result.replyFile === undefined ? '' : ` (whole in ${safeLabel(result.replyFile)})`;
  if (result.text !== '') {
    lines.push(`── reply${result.truncated ? ', clipped' : ''}${full}`, safeText(result.text));
  } else lines.push(safeText(outcomeTag(result)));
  const reason = result.reason
    ? ` (${result.code ? `${result.code}: ` : ''}${safeLabel(result.reason)})`
    : '';
  const usage = result.usage;
  const saved =
    usage.cacheSavedUsd === undefined ? '' : ` (${describeSaving(usage.cacheSavedUsd)})`;
  const cost = usage.costUsd === undefined ? '' : ` · $${usage.costUsd.toFixed(4)}${saved}`;
  const budget =
    result.budgetExceeded === undefined ? '' : ` · ${result.budgetExceeded} budget reached`;
  lines.push(
    '',
    `── ${result.outcome}${reason} · ${usage.steps} steps · ${usage.providerCalls} provider calls · ` +
      `${describeTokens(usage)}${cost}${budget} · ${result.elapsedMs} ms`,
  );
  return lines;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
