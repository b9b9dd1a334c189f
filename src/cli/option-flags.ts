import { ENGINE_FIELDS } from '../main/engine-options.js';
import { GOVERNOR_FIELDS } from '../shared/governor/options.js';
import type { Fields } from '../shared/option-schema.js';

/**
 * Options whose flag is read and checked by the CLI itself before any engine sees it, so no
 * engine message names them; and their names are common words (`logs`, `budget`) that a value in
 * a message (a tool's or a file's name) could be, which must not be rewritten.
 */
const CHECKED_BY_THE_CLI = new Set(['logs', 'budget', 'queue.rateLimit']);

/**
 * The CLI flag of each library option, for messages shown to CLI users: each field's `flag` in
 * the engine's schema (nested ones as `provider.model`). Options the CLI cannot set (`replyCap`,
 * `hostTools`, …) have none, and neither do task-line fields: a task's `maxSteps` is a field of
 * its line, so translate only messages about engine options.
 */
export const OPTION_FLAGS: Readonly<Record<string, string>> = {
  ...flagsOf(ENGINE_FIELDS),
  ...flagsOf(GOVERNOR_FIELDS, 'governor.'),
};

function flagsOf(fields: Fields, prefix = ''): Record<string, string> {
  const flags: Record<string, string> = {};
  for (const [name, field] of Object.entries(fields)) {
    const option = `${prefix}${name}`;
    if (field.flag !== undefined && !CHECKED_BY_THE_CLI.has(option)) flags[option] = field.flag;
    if (field.properties) Object.assign(flags, flagsOf(field.properties, `${option}.`));
  }
  return flags;
}

/**
 * Rewrites the library option names in a message to CLI flags: `` `ceilingMs` `` becomes
 * `` `--ceiling` ``, and `` `toolModules[1]` `` becomes `` `--tools` `` (the CLI user never saw
 * the index). Names not in `OPTION_FLAGS` are left as they are.
 */
export function flagMessage(message: string): string {
  return message.replace(/`([A-Za-z][\w.]*)(\[\d+\])?`/g, (whole, name: string) =>
    Object.hasOwn(OPTION_FLAGS, name) ? `\`${OPTION_FLAGS[name]}\`` : whole,
  );
}
