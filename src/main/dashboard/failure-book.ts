/** The most reasons kept for one failure code; later ones count under the last kept. */
const MAX_REASONS = 20;
/** The agent ids shown for one reason. */
const MAX_AGENTS = 5;
/** A reason longer than this is cut: the transcript has it whole. */
const MAX_REASON_CHARS = 300;

/** One failure code as `/api/state` serves it. */
export interface FailureGroup {
  code: string;
  count: number;
  reasons: { reason: string; count: number; agents: string[] }[];
}

/**
 * Failed agents by code, then by reason, with the first few agents of each: what a person needs
 * to see that 300 agents failed for one reason and 2 for another. Bounded whatever the run's
 * size.
 */
export class FailureBook {
  readonly #codes = new Map<string, FailureGroup>();

  add(code: string | undefined, reason: string | undefined, agent: string): void {
    const key = code ?? 'unknown';
    let group = this.#codes.get(key);
    if (!group) {
      group = { code: key, count: 0, reasons: [] };
      this.#codes.set(key, group);
    }
    group.count++;
    const text = clip(reason ?? '');
    let entry = group.reasons.find((known) => known.reason === text);
    if (!entry) {
      if (group.reasons.length >= MAX_REASONS) entry = group.reasons.at(-1);
      else {
        entry = { reason: text, count: 0, agents: [] };
        group.reasons.push(entry);
      }
    }
    if (!entry) return;
    entry.count++;
    if (entry.agents.length < MAX_AGENTS) entry.agents.push(agent);
  }

  /** Takes back a failure counted for an agent that runs again (a resumed child). */
  forget(code: string | undefined, reason: string | undefined, agent: string): void {
    const group = this.#codes.get(code ?? 'unknown');
    if (!group) return;
    group.count--;
    const entry = group.reasons.find((known) => known.reason === clip(reason ?? ''));
    if (entry) {
      entry.count--;
      entry.agents = entry.agents.filter((id) => id !== agent);
    }
    if (group.count <= 0) this.#codes.delete(group.code);
  }

  /** Every code, the most frequent first. */
  groups(): FailureGroup[] {
    return [...this.#codes.values()].sort((a, b) => b.count - a.count);
  }
}

function clip(text: string): string {
  return text.length > MAX_REASON_CHARS ? `${text.slice(0, MAX_REASON_CHARS - 1)}…` : text;
}
