/**
 * `--dashboard PORT` and `--dashboard-host HOST` on `run`, `batch` and `worker`: checked with the
 * other flags, before anything starts; the dashboard itself is served once the engine (or the
 * worker) runs, and closed at exit.
 */
import type { Dashboard, DashboardTarget } from '../main/dashboard/dashboard.js';
import type { DashboardCommand } from '../main/dashboard/state.js';
import { UsageError } from '../shared/errors.js';
import { wholeNumber } from '../shared/option-schema.js';
import { type CliFlag, type ParsedValues, stringFlag, wholeNumberFlag } from './flags.js';
import { note } from './output.js';
import { onCleanup } from './process.js';

const PORT = wholeNumber(0, 65_535, {
  flag: '--dashboard',
  arg: 'PORT',
  help: 'serve a live dashboard of the run on 127.0.0.1:PORT (0: a free port);\nits address and token go to stderr (docs/DASHBOARD.md)',
});
const HOST_FLAG: CliFlag = {
  flag: '--dashboard-host',
  arg: 'HOST',
  help: 'listen on HOST instead of 127.0.0.1: anyone who reaches it with the\ntoken can read transcripts and cancel agents',
};

export const DASHBOARD_FLAGS: readonly CliFlag[] = [PORT, HOST_FLAG];

/** Where the dashboard listens, as the flags ask. */
export interface DashboardChoice {
  port: number;
  host: string;
}

/** The dashboard the flags ask for, checked; undefined without `--dashboard`. */
export function dashboardFlags(values: ParsedValues): DashboardChoice | undefined {
  const port = wholeNumberFlag(values, PORT);
  const host = stringFlag(values, HOST_FLAG);
  if (port === undefined) {
    if (host !== undefined) {
      throw new UsageError(
        `Expected \`--dashboard PORT\` with \`--dashboard-host\`, got \`--dashboard-host ${host}\` alone`,
      );
    }
    return undefined;
  }
  return { port, host: host ?? '127.0.0.1' };
}

/**
 * Serves the dashboard of `target`, closed at exit, and says where on stderr: one line,
 * `dashboard http://127.0.0.1:PORT/?token=TOKEN`, and a warning first when it is not on loopback.
 */
export async function startDashboard(
  target: DashboardTarget,
  choice: DashboardChoice,
  command: DashboardCommand,
  options: { cancel?: boolean } = {},
): Promise<Dashboard> {
  const { serveDashboard } = await import('../main/dashboard/dashboard.js');
  const dashboard = await serveDashboard(target, { ...choice, command, ...options });
  onCleanup(() => dashboard.close());
  if (!isLoopback(dashboard.host)) {
    note(
      `cohort: warning: the dashboard listens on ${dashboard.host}, beyond this machine: anyone who reaches it with the token can read transcripts and cancel agents`,
    );
  }
  note(`dashboard ${dashboard.url}`);
  return dashboard;
}

function isLoopback(host: string): boolean {
  return host === '::1' || host.startsWith('127.') || host === '::ffff:127.0.0.1';
}
