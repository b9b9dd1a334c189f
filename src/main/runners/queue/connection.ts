/**
 * Where the queue's Redis is, as the user writes it (`--queue`, `queue.url`), turned into ioredis
 * options, and shown in messages without its password.
 *
 * Accepted forms: `redis://[user:pass@]host[:port][/db]`, `rediss://…` (TLS), `unix:///path/r.sock`,
 * or a bare socket path (any value with a `/` and no `://`: `/run/r.sock`, `./r.sock`).
 */
import type { RedisOptions } from 'ioredis';
import { expected } from '../../../shared/errors.js';

/** The general shape, for messages when a value fits none of the forms. */
/** What a queue URL must be, for messages. */
export const QUEUE_URL = 'a redis:// or rediss:// URL or a unix socket path';

/** Redis's own default port, set explicitly so the options say where they point. */
const DEFAULT_PORT = 6379;

/** How long a disconnect lets a socket close by itself (ioredis: `disconnectTimeout`). */
const DISCONNECT_WAIT_MS = 200;

/** The longest wait between two reconnection attempts. */
const MAX_RETRY_DELAY_MS = 2000;

/** BullMQ builds its keys as `bull:NAME:…`, so a name is kept short and free of `:`. */
const MAX_QUEUE_NAME_CHARS = 100;
/** What a queue name must be, for messages. */
export const QUEUE_NAME = `a queue name of 1 to ${MAX_QUEUE_NAME_CHARS} printable characters without \`:\``;

type Parsed = { options: RedisOptions } | { what: string };

/**
 * The ioredis options for a queue URL. Throws a `UsageError` (with the password hidden) when the
 * value is not one of the accepted forms; callers normally check it first with `checkQueueUrl`.
 */
export function redisOptionsOf(url: string): RedisOptions {
  const parsed = parse(url);
  if ('what' in parsed) throw expected('queue.url', parsed.what, describeRedis(url));
  return parsed.options;
}

/**
 * The URL for a message: any password replaced by `***` and any query dropped (it may carry a
 * secret), or the socket path as given.
 *
 * Read as text, not with URL: a password may hold `@`, `/` or `?` of its own, and then URL puts
 * part of it in the host or the path. So everything up to the last `@` counts as the user part.
 * A user part without `:` is hidden whole too, since some clients read `redis://SECRET@host`
 * as a password.
 */
export function describeRedis(url: string): string {
  const schemeEnd = url.indexOf('://');
  if (schemeEnd === -1) return url;
  const authorityStart = schemeEnd + 3;
  const at = url.lastIndexOf('@');
  let shown = url.slice(0, authorityStart);
  let rest = url.slice(authorityStart);
  if (at >= authorityStart) {
    const user = /^([^:/?#@]*):/s.exec(url.slice(authorityStart, at))?.[1];
    shown += user === undefined ? '***@' : `${user}:***@`;
    rest = url.slice(at + 1);
  }
  const query = rest.search(/[?#]/);
  return query === -1 ? shown + rest : `${shown}${rest.slice(0, query)}?…`;
}

/** Checks a queue URL option; returns it, or throws a `UsageError` that never shows a password. */
export function checkQueueUrl(name: string, value: unknown): string {
  if (typeof value !== 'string') throw expected(name, QUEUE_URL, value);
  const parsed = parse(value);
  if ('what' in parsed) throw expected(name, parsed.what, describeRedis(value));
  return value;
}

/** Checks a BullMQ queue name: 1 to 100 printable characters, none of them `:`. */
export function checkQueueName(name: string, value: unknown): string {
  if (
    typeof value !== 'string' ||
    value === '' ||
    [...value].length > MAX_QUEUE_NAME_CHARS ||
    // \p{C}: control, format, unassigned and lone surrogate code points, none of them printable.
    !/^[^\p{C}:]+$/u.test(value)
  ) {
    throw expected(name, QUEUE_NAME, value);
  }
  return value;
}

/** Options that every queue connection shares, whatever the address. */
function withRetries(address: RedisOptions): RedisOptions {
  return {
    ...address,
    // BullMQ's workers block on Redis and require it; a command waits for the connection to
    // come back instead of failing after a few attempts.
    maxRetriesPerRequest: null,
    // Redis restarting must never end a worker: back off, then keep trying every 2 s forever.
    retryStrategy: (attempt: number) => Math.min(200 * attempt, MAX_RETRY_DELAY_MS),
    // How long a disconnect waits for the socket to close before it destroys it. The wait is a
    // timer that only the socket's close clears, so a socket that had already failed (Redis never
    // reached) held the process open for ioredis's default 2 s after everything else was done.
    // Every disconnect here comes after a QUIT was answered or its grace ran out, so what a slow
    // link still buffers then is given up on sooner: a best-effort end either way.
    disconnectTimeout: DISCONNECT_WAIT_MS,
  };
}

function parse(value: string): Parsed {
  if (value === '' || /\p{Cc}/u.test(value)) return { what: QUEUE_URL };
  if (!value.includes('://')) {
    if (!value.includes('/')) return { what: QUEUE_URL };
    // `redis:/h` or `unix:/r.sock` is more likely a mistyped URL than a folder named `redis:`.
    if (/^[a-z][a-z0-9+.-]*:/i.test(value)) return { what: QUEUE_URL };
    return { options: withRetries({ path: value }) };
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { what: QUEUE_URL };
  }
  if (url.search !== '' || url.hash !== '') {
    return { what: `${QUEUE_URL}, without a query or a fragment` };
  }
  switch (url.protocol) {
    case 'redis:':
    case 'rediss:':
      return parseNetworkUrl(url);
    case 'unix:':
      return parseSocketUrl(url);
    default:
      return { what: QUEUE_URL };
  }
}

function parseNetworkUrl(url: URL): Parsed {
  // An IPv6 address comes bracketed from URL; ioredis wants it bare.
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (host === '') return { what: `${QUEUE_URL}, with a host` };
  const port = url.port === '' ? DEFAULT_PORT : Number(url.port);
  if (port < 1) return { what: `${QUEUE_URL}, with a port from 1 to 65535` };
  const db = /^\/?$/.test(url.pathname) ? undefined : /^\/(\d{1,9})$/.exec(url.pathname)?.[1];
  if (url.pathname !== '' && url.pathname !== '/' && db === undefined) {
    return { what: `${QUEUE_URL}, with a database number as its path (\`/0\`, \`/1\`, …)` };
  }
  const username = decoded(url.username);
  const password = decoded(url.password);
  if (username === undefined || password === undefined) {
    return { what: `${QUEUE_URL}, with a well-formed user name and password` };
  }
  const options: RedisOptions = { host, port };
  if (username !== '') options.username = username;
  if (password !== '') options.password = password;
  if (db !== undefined) options.db = Number(db);
  if (url.protocol === 'rediss:') options.tls = {};
  return { options: withRetries(options) };
}

function parseSocketUrl(url: URL): Parsed {
  // `unix://r.sock` would put the file name where a host goes: only `unix:///absolute` is meant.
  if (url.host !== '' || url.username !== '' || url.password !== '') {
    return { what: `${QUEUE_URL}, as unix:///absolute/path` };
  }
  const path = decoded(url.pathname);
  if (path === undefined || path === '/' || path.endsWith('/')) {
    return { what: `${QUEUE_URL}, as unix:///absolute/path` };
  }
  return { options: withRetries({ path }) };
}

/** URL keeps percent-escapes in the user name, password and path; Redis wants the real text. */
function decoded(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}
