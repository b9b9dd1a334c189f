import { UsageError } from '../../shared/errors.js';

/** `${VAR}` or `${VAR:-default}`, as Claude Code's `.mcp.json` writes them. */
const REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/**
 * `text` with each `${VAR}` replaced by that environment variable, and each `${VAR:-default}` by
 * the variable or, when it is unset or empty, the default. A variable that is unset and has no
 * default is refused: a server started with an empty token fails later with a vaguer message.
 * The message names the variable and `where`, never a value.
 */
export function expandVariables(
  text: string,
  where: string,
  env: Readonly<Record<string, string | undefined>>,
): string {
  return text.replace(REFERENCE, (_whole, name: string, fallback: string | undefined) => {
    const value = env[name];
    if (value !== undefined && (value !== '' || fallback === undefined)) return value;
    if (fallback !== undefined) return fallback;
    throw new UsageError(
      `Expected the environment variable \`${name}\` to be set for ${where}, got it unset (write \`\${${name}:-default}\` to give a default)`,
    );
  });
}
