import { type HelpRow, helpLines, type ParseOptions, parseOptions } from '../flags.js';
import { ENGINE_FLAGS } from './common.js';

/**
 * The engine flags plus a command's own (`agent`, `run`, `demo` and `batch`): their parseArgs
 * table. The rows are the ones the command's help lists, so what it parses is what it lists.
 */
export function commandOptions(own: readonly HelpRow[] = []): ParseOptions {
  return parseOptions([...ENGINE_FLAGS, ...own]);
}

/** A command's own options, as its help lists them above the engine's. */
export function ownHelp(rows: readonly HelpRow[]): string {
  return helpLines(rows, 21);
}

/** The engine flags, as every engine command's help lists them. */
export const COMMON_HELP = `
Engine options:
${helpLines(ENGINE_FLAGS, 28)}
Durations: 500ms, 2s, 5m, 1h, or whole milliseconds, up to about 24.8 days.`;

export const EXIT_CODES_HELP = '\nExit codes:';
