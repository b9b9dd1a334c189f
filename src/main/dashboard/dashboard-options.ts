import type { PriceTable } from '../../shared/budget.js';
import { expected, UsageError } from '../../shared/errors.js';
import type { Governor } from '../../shared/governor/governor.js';
import {
  boolean,
  checkOptions,
  durationMs,
  type Fields,
  nonEmptyString,
  oneOf,
  wholeNumber,
} from '../../shared/option-schema.js';
import type { SpawnObserver } from '../spawn-observer.js';
import { newToken } from './access.js';
import { DEFAULT_MAX_AGENTS } from './agent-book.js';
import type { DashboardCommand } from './state.js';

/** The deltas' default pace: at most four a second. */
export const DEFAULT_UPDATE_MS = 250;

/** What a dashboard watches: an `Engine`, a `QueueWorker`, or anything that can be observed so. */
export interface DashboardTarget {
  observe(observer: SpawnObserver): () => void;
  readonly governor?: Governor | undefined;
  /** The run's journal folder, for transcripts. */
  readonly logDir?: string | undefined;
  /** The price table its agents' steps are priced by (the engine's `prices`). */
  readonly prices?: Readonly<PriceTable> | undefined;
}

export interface DashboardOptions {
  /** The port (default 0: a free one). */
  port?: number;
  /** The address it listens on (default 127.0.0.1). */
  host?: string;
  /** The token every request must carry (default: 128 fresh random bits). */
  token?: string;
  /** How often a delta may go to the page, in ms (default 250). */
  updateMs?: number;
  /**
   * Rows show each step's usage as it ends (default true); false shows an agent's usage when it
   * settles, and saves a message per step from its worker.
   */
  steps?: boolean;
  /**
   * The most agents it shows (default 100,000): past that, the oldest settled ones are dropped
   * from the tree (the totals still count them).
   */
  maxAgents?: number;
  /** What the page's header names (default `library`). */
  command?: DashboardCommand;
  /** Whether the page offers cancel (default true). */
  cancel?: boolean;
}

/** The options with their defaults, checked. */
export type DashboardSettings = Required<DashboardOptions>;

/** The options' checks: `serveDashboard` refuses anything else with what it expected. */
const DASHBOARD_FIELDS = {
  port: wholeNumber(0, 65_535),
  host: nonEmptyString(),
  token: {
    type: 'string',
    pattern: '^[A-Za-z0-9_-]{16,}$',
    expected: 'at least 16 letters, digits, _ or -',
  },
  updateMs: durationMs(50),
  steps: boolean(),
  maxAgents: wholeNumber(10),
  command: oneOf<DashboardCommand>(
    ['run', 'batch', 'worker', 'library'],
    'run, batch, worker or library',
  ),
  cancel: boolean(),
} as const satisfies Fields;

/**
 * `options` checked, with their defaults, and `target` checked: a UsageError says what was
 * expected of the first that is wrong, before anything listens.
 */
export function dashboardSettings(
  target: DashboardTarget,
  options: DashboardOptions,
): DashboardSettings {
  if (typeof options !== 'object' || options === null) {
    throw expected('dashboard options', 'an object', options);
  }
  const unknown = Object.keys(options).find((key) => !(key in DASHBOARD_FIELDS));
  if (unknown !== undefined) {
    throw new UsageError(
      `Expected dashboard options among ${Object.keys(DASHBOARD_FIELDS).join(', ')}, got \`${unknown}\``,
    );
  }
  checkOptions(DASHBOARD_FIELDS, options as Readonly<Record<string, unknown>>);
  if (typeof target?.observe !== 'function') {
    throw expected(
      'serveDashboard target',
      'an Engine or a QueueWorker (something with observe)',
      target,
    );
  }
  return {
    port: options.port ?? 0,
    host: options.host ?? '127.0.0.1',
    token: options.token ?? newToken(),
    updateMs: options.updateMs ?? DEFAULT_UPDATE_MS,
    steps: options.steps ?? true,
    maxAgents: options.maxAgents ?? DEFAULT_MAX_AGENTS,
    command: options.command ?? 'library',
    cancel: options.cancel ?? true,
  };
}
