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

/**
 * An event with secrets removed from the strings it carries (streamed text, tool input, a
 * result's text and reason). Cheap when there is nothing to remove.
 */
export function redactEvent<Event extends { type: string }>(event: Event): Event {
  const record = event as unknown as Record<string, unknown>;
  switch (event.type) {
    case 'text-delta':
      return { ...event, text: redactSecrets(String(record.text)) };
    case 'tool-call':
      return { ...event, input: JSON.parse(redactSecrets(JSON.stringify(record.input ?? null))) };
    case 'agent-settle': {
      const result = record.result as { text: string; reason?: string };
      return {
        ...event,
        result: {
          ...result,
          text: redactSecrets(result.text),
          ...(result.reason === undefined ? {} : { reason: redactSecrets(result.reason) }),
        },
      };
    }
    default:
      return event;
  }
}
