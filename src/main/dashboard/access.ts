import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** A fresh dashboard token: 128 random bits, as hex. */
export function newToken(): string {
  return randomBytes(16).toString('hex');
}

/**
 * The token a request carries: `Authorization: Bearer T`, `X-Cohort-Token: T`, `?token=T`, or
 * the `/s/T/` prefix of the page's own files.
 */
export function tokenOf(request: IncomingMessage, url: URL): string | undefined {
  const bearer = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '')?.[1];
  if (bearer) return bearer;
  const header = request.headers['x-cohort-token'];
  if (typeof header === 'string' && header !== '') return header;
  const query = url.searchParams.get('token');
  if (query) return query;
  return /^\/s\/([^/]+)\//.exec(url.pathname)?.[1];
}

/** Whether `given` is `token`, in time that does not depend on where they differ. */
export function sameToken(given: string | undefined, token: string): boolean {
  if (given === undefined) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * A request sent by a page of another origin: its `Origin` is not this server's own (as the
 * `Host` it was sent to names it). A request without `Origin` (curl, a script) is no such thing.
 */
export function foreignOrigin(request: IncomingMessage): boolean {
  const origin = request.headers.origin;
  if (origin === undefined) return false;
  const host = request.headers.host;
  return host === undefined || origin !== `http://${host}`;
}
