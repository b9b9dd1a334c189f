/**
 * A journal record as one line of `cohort logs tail`: when, which agent (with its title), and
 * what: started, a step's tool calls or their answers, the result.
 */
import type { JournalRecord, StepRecord } from '../../shared/journal/format.js';
import { safeLabel } from '../output.js';
import { clipLabel, pieces, toolCalls } from './blocks.js';

/** Records as `tail` prints them: what it knows of each agent from its earlier records. */
export class RecordLines {
  readonly #titles = new Map<string, string>();
  readonly #steps = new Map<string, number>();
  /** The names of the calls not answered yet, by agent and tool_use id. */
  readonly #calls = new Map<string, string>();

  /** A record's line (without its newline), or undefined for a segment's header. */
  line(record: JournalRecord): string | undefined {
    switch (record.k) {
      case 'segment':
        return undefined;
      case 'batch':
        return safeLabel(
          `${new Date(record.at).toISOString()} Message Batch ${record.b} created with ${record.c.length} step(s)`,
        );
      case 'batch-read':
        return safeLabel(`${new Date(record.at).toISOString()} Message Batch ${record.b} read`);
      case 'start': {
        const title = record.meta.title;
        if (typeof title === 'string') this.#titles.set(record.a, title);
        const steps = assistantCount(record.m);
        this.#steps.set(record.a, steps);
        const what =
          record.inc === 0
            ? 'started'
            : `resumed on a fresh worker (run ${record.inc + 1}) after step ${steps}`;
        return this.#format(record.at, record.a, what);
      }
      case 'step': {
        const steps = (this.#steps.get(record.a) ?? 0) + assistantCount(record.m);
        this.#steps.set(record.a, steps);
        return this.#format(undefined, record.a, `step ${steps} ${this.#stepParts(record)}`);
      }
      case 'result': {
        const result = record.r;
        if (!this.#titles.has(record.a)) this.#titles.set(record.a, result.title);
        const code = result.code === undefined ? '' : ` [${result.code}]`;
        const reason = result.reason === undefined ? '' : `: ${result.reason}`;
        const kept = record.keep ? '' : ' (its records go at close)';
        return this.#format(
          record.at,
          record.a,
          `result ${result.outcome}${code}${reason} · ${result.usage.steps} steps · ${result.elapsedMs} ms${kept}`,
        );
      }
    }
  }

  /**
   * What a step's record holds: the response's tool calls (`→ read_file, echo`), and the answers
   * to them (`← read_file, echo ✗`, a failed one marked), or a message such as the nudge. A step
   * is journaled as its response, then the answers, each a record; an older journal has both in
   * one.
   */
  #stepParts(record: StepRecord): string {
    const parts: string[] = [];
    for (const message of record.m) {
      if (message.role === 'assistant') {
        const calls = toolCalls(message);
        for (const call of calls) this.#calls.set(`${record.a} ${call.id}`, call.name);
        parts.push(
          calls.length === 0 ? 'no tool call' : `→ ${calls.map((call) => call.name).join(', ')}`,
        );
        continue;
      }
      const answers = pieces(message).flatMap((piece) => {
        if (piece.kind === 'text') return ['a user message'];
        if (piece.kind !== 'result') return [];
        const key = `${record.a} ${piece.toolUseId}`;
        const name = this.#calls.get(key) ?? 'a call';
        this.#calls.delete(key);
        return [`${name}${piece.error ? ' ✗' : ''}`];
      });
      if (answers.length > 0) parts.push(`← ${answers.join(', ')}`);
    }
    return parts.join(' ');
  }

  #format(at: number | undefined, id: string, what: string): string {
    // A step's record carries no time of its own: its column is left blank.
    const when = at === undefined ? ' '.repeat(24) : new Date(at).toISOString();
    const title = this.#titles.get(id);
    const label = title === undefined ? '' : ` [${clipLabel(title, 40)}]`;
    return safeLabel(`${when} ${id}${label} ${what}`);
  }
}

function assistantCount(messages: readonly { role: string }[]): number {
  return messages.filter((message) => message.role === 'assistant').length;
}
