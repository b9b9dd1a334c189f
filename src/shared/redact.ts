import { API_KEY_ENV } from './provider/config.js';

const REDACTED = '[redacted]';

/**
 * Removes secrets from text bound for a log, a transcript, an event or an error: the API key from
 * the environment wherever it appears, and anything shaped like an Anthropic key.
 */
export function redactSecrets(text: string): string {
  let out = text;
  const key = process.env[API_KEY_ENV];
  if (key && key.length >= 8) out = out.split(key).join(REDACTED);
  return out.replace(/sk-ant-[A-Za-z0-9_-]{8,}/g, REDACTED);
}
