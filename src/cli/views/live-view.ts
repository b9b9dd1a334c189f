import { ROOT_ID, type SessionEvent } from '../../main/session.js';
import type { AgentResult } from '../../shared/result.js';
import { safeLabel, safeText } from '../output.js';
import { describeGovernor } from './governor-view.js';

interface Out {
  write(text: string): unknown;
}

/** How a settled agent is marked: complete, failed and cancelled each at a glance. */
const MARKERS: Record<AgentResult['outcome'], string> = {
  complete: '✓',
  failed: '✗',
  cancelled: '⊘',
  empty: '–',
  capped: '–',
};

/**
 * A readable live view of a session: the root's streamed text, a line per child as it starts
 * and settles, each settled result, and a running count.
 */
export class LiveView {
  readonly #out: Out;
  readonly #titles = new Map<string, string>();
  /** Per governor key, what its last line said (paused, quota): a line only when that changes. */
  readonly #governorShown = new Map<string, string>();
  readonly #settled: AgentResult[] = [];
  #started = 0;
  #atLineStart = true;
  readonly #resultLines: number;

  constructor(out: Out, options: { resultLines?: number } = {}) {
    this.#out = out;
    this.#resultLines = options.resultLines ?? 6;
  }

  get settled(): readonly AgentResult[] {
    return this.#settled;
  }

  #line(text: string): void {
    if (!this.#atLineStart) this.#out.write('\n');
    this.#out.write(`${text}\n`);
    this.#atLineStart = true;
  }

  handle(event: SessionEvent): void {
    switch (event.type) {
      case 'text-delta':
        if (event.agentId !== ROOT_ID) return;
        this.#out.write(safeText(event.text));
        this.#atLineStart = event.text.endsWith('\n');
        return;
      case 'turn-start':
        if (event.delivered > 0) this.#line(`· ${event.delivered} result(s) delivered to the root`);
        return;
      case 'agent-start':
        this.#started++;
        this.#titles.set(event.agentId, safeLabel(event.title));
        this.#line(`  ▸ ${event.mode} agent started: ${safeLabel(event.title)} (${event.agentId})`);
        return;
      case 'agent-settle': {
        if (!this.#titles.has(event.agentId) || this.#settled.some((r) => r.id === event.agentId))
          return;
        const result = event.result;
        this.#settled.push(result);
        const reason = result.reason
          ? ` (${result.code ? `${result.code}: ` : ''}${safeLabel(result.reason)})`
          : '';
        this.#line(
          `  ${MARKERS[result.outcome]} [${this.#settled.length}/${this.#started}] ${safeLabel(result.title)}: ${result.outcome}${reason} in ${result.elapsedMs} ms`,
        );
        if (result.text !== '') {
          const lines = safeText(result.text).split('\n');
          const shown = lines.slice(0, this.#resultLines).map((line) => `      ${line}`);
          if (lines.length > this.#resultLines)
            shown.push(`      … (${lines.length - this.#resultLines} more lines)`);
          this.#line(shown.join('\n'));
        }
        return;
      }
      case 'provider-retry': {
        const who =
          event.agentId === ROOT_ID ? 'root' : (this.#titles.get(event.agentId) ?? event.agentId);
        const why = event.status === undefined ? event.code : `${event.status} ${event.code}`;
        const how = event.paced
          ? event.waitMs > 0
            ? `backing off ${(event.waitMs / 1000).toFixed(1)} s, then back in the governor queue`
            : 'back in the governor queue'
          : `attempt ${event.attempt} of ${event.maxAttempts}, waiting ${(event.waitMs / 1000).toFixed(1)} s`;
        this.#line(`  ↻ ${who}: retrying after ${why} (${how})`);
        return;
      }
      case 'governor-update': {
        // Only what holds agents back is worth a line: a pause, a spent quota, an open breaker.
        const { state } = event;
        const paused = (state.pausedUntil ?? 0) > Date.now();
        const key = `${paused}|${state.exhausted ?? ''}|${state.breaker?.state ?? ''}`;
        if (key === this.#governorShown.get(state.key)) return;
        this.#governorShown.set(state.key, key);
        if (paused || state.exhausted !== undefined || state.breaker !== undefined) {
          this.#line(`  ⏸ governor: ${safeLabel(describeGovernor(state))}`);
        }
        return;
      }
      case 'agent-stale':
        // Same generation: the session closed under it, and its settle line already said so.
        if (event.generation === event.current) return;
        this.#line(
          `  · result of ${event.agentId} from before a clear (generation ${event.generation}) not delivered`,
        );
        return;
      case 'tool-call':
        if (event.agentId === ROOT_ID && event.name !== 'agent')
          this.#line(`  · root calls ${safeLabel(event.name)}`);
        return;
      case 'turn-end':
        if (event.result.outcome !== 'ready') {
          this.#line(
            `· root turn ended ${event.result.outcome}${event.result.reason ? `: ${safeLabel(event.result.reason)}` : ''}`,
          );
        } else if (!this.#atLineStart) this.#line('');
        return;
      default:
        return;
    }
  }
}
