import { API_KEY_ENV, AUTH_TOKEN_ENV } from './provider/config.js';

const REDACTED = '[redacted]';
/** How every Anthropic key starts. */
const SHAPE_PREFIX = 'sk-ant-';
/** An `sk-ant-` string counts as a key from this many key characters on. */
const SHAPE_MIN_CHARS = 8;
const KEY_SHAPED = new RegExp(`${SHAPE_PREFIX}[A-Za-z0-9_-]{${SHAPE_MIN_CHARS},}`, 'g');
/** A key's characters; any other character ends a key-shaped run. */
const NON_KEY_CHAR = /[^A-Za-z0-9_-]/;

/** The shortest secret redacted as itself: a shorter one would mangle prose. */
const MIN_SECRET_CHARS = 8;

/**
 * Keys given in code rather than the environment (a spawn's or a group's `provider.apiKey`),
 * registered on each thread that holds one. They stay registered for the thread's life: a key
 * a model echoes after its agent settled must still be caught, and a service's keys are few.
 */
const registered = new Set<string>();

/**
 * Makes `secret` one of the texts `redactSecrets` and `StreamRedactor` remove, on this thread,
 * from now on. A secret shorter than 8 characters is not registered (it could not be told from
 * prose); the key shape still catches real Anthropic keys.
 */
export function registerSecret(secret: string): void {
  if (secret.length >= MIN_SECRET_CHARS) registered.add(secret);
}

/**
 * The credential from the environment that requests carry (the API key, else the bearer token),
 * when it is long enough to redact without mangling prose.
 */
function environmentKey(): string | undefined {
  const key = process.env[API_KEY_ENV]?.trim() || process.env[AUTH_TOKEN_ENV]?.trim();
  return key && key.length >= MIN_SECRET_CHARS ? key : undefined;
}

/** Every exact secret to remove: the environment's credential, then the registered keys. */
function exactSecrets(): string[] {
  const key = environmentKey();
  if (registered.size === 0) return key ? [key] : [];
  const all = [...registered];
  if (key && !registered.has(key)) all.unshift(key);
  return all;
}

/**
 * Removes secrets from text bound for a log, a transcript, an event or an error: the API key from
 * the environment and every registered key (`registerSecret`) wherever they appear, and anything
 * shaped like an Anthropic key.
 */
export function redactSecrets(text: string): string {
  let out = text;
  for (const secret of exactSecrets()) {
    if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  }
  return out.replace(KEY_SHAPED, REDACTED);
}

/**
 * Redacts a text that arrives in chunks, such as a model's streamed reply, so that a secret cut
 * across chunks is still caught. Each `push` returns what can be released at once: everything but
 * a tail that could still be the start of a secret (a proper prefix of the environment key or of
 * `sk-ant-`, or an `sk-ant-` run whose end has not arrived). Plain text therefore comes out in the
 * same push.
 * The concatenation of everything returned, `flush` included, is exactly `redactSecrets` of the
 * whole text; before `flush` it is a prefix of it.
 *
 * Use one per stream, `flush` when the stream ends well, and `discard` when it fails: the held
 * tail of a broken stream may be a piece of a key, so it is dropped rather than shown.
 */
export class StreamRedactor {
  // Stages in the order redactSecrets applies them: each exact secret, then the key shape.
  readonly #keys: KeyStage[];
  readonly #shape = new ShapeStage();

  constructor() {
    this.#keys = exactSecrets().map((secret) => new KeyStage(secret));
  }

  /** The part of the text so far that can no longer belong to a secret, redacted. */
  push(chunk: string): string {
    let text = chunk;
    for (const stage of this.#keys) text = stage.push(text);
    return this.#shape.push(text);
  }

  /** The stream ended: releases the held tail, redacted, and starts afresh. */
  flush(): string {
    // Each stage's held tail goes through the stages after it, as pushed text would.
    let rest = '';
    for (let index = 0; index < this.#keys.length; index++) {
      let released = this.#keys[index]!.push(rest);
      released += this.#keys[index]!.flush();
      rest = released;
    }
    return this.#shape.push(rest) + this.#shape.flush();
  }

  /** The stream broke off: drops the held tail and starts afresh. */
  discard(): void {
    for (const stage of this.#keys) stage.flush();
    this.#shape.flush();
  }
}

/** Replaces the exact key, holding back a tail that is a proper prefix of it. */
class KeyStage {
  readonly #key: string;
  #held = '';

  constructor(key: string) {
    this.#key = key;
  }

  push(chunk: string): string {
    const text = this.#held + chunk;
    let out = '';
    let from = 0;
    // Leftmost, non-overlapping: the occurrences `split` would cut at.
    for (let at = text.indexOf(this.#key); at !== -1; at = text.indexOf(this.#key, from)) {
      out += text.slice(from, at) + REDACTED;
      from = at + this.#key.length;
    }
    const cut = partialStart(text, from, this.#key);
    this.#held = text.slice(cut);
    return out + text.slice(from, cut);
  }

  flush(): string {
    const held = this.#held;
    this.#held = '';
    return held;
  }
}

/**
 * Replaces `sk-ant-` runs of 8 key characters or more, as the KEY_SHAPED pattern does. Holds a
 * tail that is a proper prefix of `sk-ant-`, or a whole run until a character that is not a key
 * character arrives: only then is its length, and so its fate, known.
 */
class ShapeStage {
  #held = '';
  /** Whether `#held` is an `sk-ant-` run still open at its end. */
  #inRun = false;

  push(chunk: string): string {
    if (!this.#inRun) return this.#scan(this.#held + chunk);
    // Only the new chunk is searched for the run's end, so a long run costs linear time.
    const end = chunk.search(NON_KEY_CHAR);
    if (end === -1) {
      this.#held += chunk;
      return '';
    }
    const run = this.#held + chunk.slice(0, end);
    this.#held = '';
    this.#inRun = false;
    // A closed run is redacted alone exactly as within the whole text: no match crosses its end.
    return run.replace(KEY_SHAPED, REDACTED) + this.#scan(chunk.slice(end));
  }

  flush(): string {
    const held = this.#held;
    this.#held = '';
    this.#inRun = false;
    return held.replace(KEY_SHAPED, REDACTED);
  }

  /** Releases `text` up to its first open run or partial prefix, which it holds. */
  #scan(text: string): string {
    let out = '';
    let from = 0;
    for (let at = text.indexOf(SHAPE_PREFIX); at !== -1; at = text.indexOf(SHAPE_PREFIX, from)) {
      const runStart = at + SHAPE_PREFIX.length;
      const stop = text.slice(runStart).search(NON_KEY_CHAR);
      if (stop === -1) {
        this.#held = text.slice(at);
        this.#inRun = true;
        return out + text.slice(from, at);
      }
      if (stop >= SHAPE_MIN_CHARS) {
        out += text.slice(from, at) + REDACTED;
        from = runStart + stop;
      } else {
        // Too short to be a key here; the pattern goes on looking from the next character.
        out += text.slice(from, at + 1);
        from = at + 1;
      }
    }
    const cut = partialStart(text, from, SHAPE_PREFIX);
    this.#held = text.slice(cut);
    return out + text.slice(from, cut);
  }
}

/**
 * Where the longest tail of `text` (from `from` on) that is a proper prefix of `secret` begins,
 * or `text.length` when there is none. Longer tails were ruled out by the caller's search.
 */
function partialStart(text: string, from: number, secret: string): number {
  for (let start = Math.max(from, text.length - secret.length + 1); start < text.length; start++) {
    if (secret.startsWith(text.slice(start))) return start;
  }
  return text.length;
}

/** A JSON value with secrets removed from every string in it (a key's shape holds no quote). */
export function redactValue(value: unknown): unknown {
  if (value === undefined) return undefined;
  return JSON.parse(redactSecrets(JSON.stringify(value)));
}

/**
 * An event with secrets removed from the strings it carries (tool input, a retry's message, a
 * result's text and reason). Streamed text is not touched here: every `text-delta` already
 * comes out of the agent loop's StreamRedactor, which a per-chunk pass could only repeat, once
 * per token.
 */
export function redactEvent<Event extends { type: string }>(event: Event): Event {
  const record = event as unknown as Record<string, unknown>;
  switch (event.type) {
    case 'provider-retry':
      return { ...event, message: redactSecrets(String(record.message)) };
    case 'tool-call':
      return { ...event, input: redactValue(record.input ?? null) };
    case 'agent-settle': {
      const result = record.result as { text: string; reason?: string; value?: unknown };
      return {
        ...event,
        result: {
          ...result,
          text: redactSecrets(result.text),
          ...(result.reason === undefined ? {} : { reason: redactSecrets(result.reason) }),
          ...('value' in result ? { value: redactValue(result.value) } : {}),
        },
      };
    }
    default:
      return event;
  }
}
