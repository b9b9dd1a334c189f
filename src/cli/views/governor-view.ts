import type { GovernorState, LimitState } from '../../shared/governor/types.js';

const thousands = new Intl.NumberFormat('en-US');

/**
 * One key's governor state for people, in one line:
 * `claude-sonnet-5: 37/40 in flight, 120 queued, paused 2.1 s; learned 4,000 rpm, 400,000 itpm`.
 * The label's endpoint is left out: a run rarely talks to more than one.
 */
export function describeGovernor(state: GovernorState, now = Date.now()): string {
  const model = state.label.split(' at ')[0] ?? state.label;
  const parts = [`${state.inFlight}/${state.limit} in flight`, ...holdingBack(state, now)];
  const limits = describeLimits(state);
  return `${model}: ${parts.join(', ')}${limits ? `; ${limits}` : ''}`;
}

/** `gov 37/40, 120 queued, paused 2.1 s`: the same, short enough for a progress bar. */
export function describeGovernorShort(state: GovernorState, now = Date.now()): string {
  return [`gov ${state.inFlight}/${state.limit}`, ...holdingBack(state, now)].join(', ');
}

/**
 * What holds requests back: `120 queued`, `paused 2.1 s`, `12% refused`, `quota spent`,
 * `provider unreachable`, `key refused` (`, probing` once the breaker lets one request try).
 */
function holdingBack(state: GovernorState, now: number): string[] {
  const parts: string[] = [];
  if (state.queued > 0) parts.push(`${state.queued} queued`);
  if (state.pausedUntil !== undefined && state.pausedUntil > now) {
    parts.push(`paused ${((state.pausedUntil - now) / 1000).toFixed(1)} s`);
  }
  // A few refusals are the provider's weather; a share worth reading is shown.
  if (state.refusalRate >= 0.01) parts.push(`${Math.round(state.refusalRate * 100)}% refused`);
  if (state.exhausted !== undefined) parts.push('quota spent');
  if (state.breaker !== undefined) {
    const what = state.breaker.code === 'auth' ? 'key refused' : 'provider unreachable';
    parts.push(state.breaker.state === 'half-open' ? `${what}, probing` : what);
  }
  return parts;
}

/** `learned 4,000 rpm, 400,000 itpm` (or `configured …`), or '' when no limit is known. */
function describeLimits(state: GovernorState): string {
  const known: [LimitState | undefined, string][] = [
    [state.requests, 'rpm'],
    [state.inputTokens, 'itpm'],
    [state.outputTokens, 'otpm'],
  ];
  const shown = known.filter((entry): entry is [LimitState, string] => entry[0] !== undefined);
  if (shown.length === 0) return '';
  const learned = shown.some(([limit]) => limit.source === 'learned');
  const text = shown.map(([limit, unit]) => `${thousands.format(limit.limit)} ${unit}`).join(', ');
  return `${learned ? 'learned' : 'configured'} ${text}`;
}
