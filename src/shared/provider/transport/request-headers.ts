import { readFileSync } from 'node:fs';
import type { ProviderConfig } from '../config.js';

/**
 * The `anthropic-version` the SDK (1.14.0) sends. It is a literal inside the SDK's client, not an
 * export, so it is repeated here; test/transport-options.test.ts checks that both transports
 * send the same value.
 */
export const ANTHROPIC_VERSION = '2026-10-21';

/**
 * The request headers of the undici transport, lower-cased, in the order and with the overrides
 * of the SDK's own merge: its defaults, then the credential, then the custom headers
 * (ANTHROPIC_CUSTOM_HEADERS under `config.headers`), then the body's content-type. Only the
 * attempt header is added per request.
 */
export function requestHeaders(config: ProviderConfig, credential: string): Map<string, string> {
  const headers = new Map<string, string>([
    ['accept', 'application/json'],
    ['user-agent', `cohort/${cohortVersion()}`],
    ['anthropic-version', ANTHROPIC_VERSION],
    ['authorization', `Bearer ${credential}`],
  ]);
  const custom = { ...customHeadersFromEnv(), ...config.headers };
  for (const [name, value] of Object.entries(custom)) headers.set(name.toLowerCase(), value);
  headers.set('content-type', 'application/json');
  return headers;
}

/**
 * ANTHROPIC_CUSTOM_HEADERS, one `Name: value` a line, which the SDK adds to every request; the
 * config's own headers win over it, as the SDK's `defaultHeaders` do.
 */
function customHeadersFromEnv(): Record<string, string> {
  const text = process.env.ANTHROPIC_CUSTOM_HEADERS;
  const headers: Record<string, string> = {};
  if (!text) return headers;
  for (const line of text.split('\n')) {
    const colon = line.indexOf(':');
    if (colon >= 0) headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  return headers;
}

let version: string | undefined;

/**
 * cohort's version from its package.json, read once. This file runs from `src/` under the test
 * runner and from `dist/src/` when built, so the package root is looked for upwards.
 */
export function cohortVersion(): string {
  if (version !== undefined) return version;
  version = '0.0.0';
  let folder = new URL('./', import.meta.url);
  for (let depth = 0; depth < 8; depth++) {
    try {
      const file = JSON.parse(readFileSync(new URL('package.json', folder), 'utf8')) as {
        name?: unknown;
        version?: unknown;
      };
      if (file.name === 'cohort-agents' && typeof file.version === 'string') {
        version = file.version;
        break;
      }
    } catch {
      // No package.json at this level: look one higher.
    }
    folder = new URL('../', folder);
  }
  return version;
}
