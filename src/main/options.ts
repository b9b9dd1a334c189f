import { GOVERNOR_FIELDS } from '../shared/governor/options.js';
import type { Fields } from '../shared/option-schema.js';
import { ENGINE_FIELDS } from './engine-options.js';

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
    if (field.flag !== undefined) flags[`${prefix}${name}`] = field.flag;
    if (field.properties) Object.assign(flags, flagsOf(field.properties, `${prefix}${name}.`));
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
