import type { Governor } from '../src/shared/governor/governor.js';
import type {
  Admission,
  AdmitRequest,
  GovernorState,
  SettleReport,
} from '../src/shared/governor/types.js';

// What the tests that drive the `Governor` directly share.

export const KEY = 'http://test key-hash model';
export const OK: SettleReport = { outcome: 'ok', usage: { inputTokens: 10, outputTokens: 5 } };
export const NO_USAGE = { inputTokens: 0, outputTokens: 0 };

/** An admission request for `KEY`, with `overrides`. */
export function ask(overrides: Partial<AdmitRequest> = {}): AdmitRequest {
  return {
    key: KEY,
    label: 'model at test',
    inputTokens: 10,
    maxTokens: 100,
    priority: false,
    ...overrides,
  };
}

/** A signal that never aborts. */
export const never = (): AbortSignal => new AbortController().signal;

export function stateOf(governor: Governor, key = KEY): GovernorState {
  const state = governor.states().find((candidate) => candidate.key === key);
  if (!state) throw new Error(`Expected a governor state for key ${key}, got none`);
  return state;
}

export function permitOf(admission: Admission): number {
  if (!admission.ok) throw new Error(`Expected an admission, got ${JSON.stringify(admission)}`);
  return admission.permit;
}
