import { API_KEY_ENV, AUTH_TOKEN_ENV, PLACEHOLDER_KEY, type ProviderConfig } from '../config.js';

/** The base URL when neither the config nor ANTHROPIC_BASE_URL names one. */
export const DEFAULT_BASE_URL = 'https://api.anthropic.com';

/** The Messages API path both transports append to the base URL. */
const MESSAGES_PATH = '/v1/messages';

/** An environment variable as the SDK reads it: trimmed, and empty counts as unset. */
function readEnv(name: string): string | undefined {
  return process.env[name]?.trim() || undefined;
}

/** The base URL requests go to, resolved as the SDK resolves it. */
export function resolveBaseURL(config: ProviderConfig): string {
  return (config.baseURL ?? readEnv('ANTHROPIC_BASE_URL')) || DEFAULT_BASE_URL;
}

/**
 * The credential sent as `Authorization: Bearer`: the key given in code (a spawn's or a group's
 * `provider.apiKey`), else ANTHROPIC_API_KEY, else ANTHROPIC_AUTH_TOKEN, else a placeholder (the
 * scripted model ignores keys). The SDK (1.14) prefers the key when both are set and sends either
 * one as a bearer token, so both transports send the same header.
 */
export function resolveCredential(apiKey?: string): string {
  return apiKey ?? readEnv(API_KEY_ENV) ?? readEnv(AUTH_TOKEN_ENV) ?? PLACEHOLDER_KEY;
}

/**
 * The request URL, joined as the SDK joins it: the base URL plus `/v1/messages`, one slash
 * between them, any path of the base URL kept. Throws a TypeError for a base URL that does not
 * parse, as the SDK does.
 */
export function messagesURL(baseURL: string): URL {
  const path = baseURL.endsWith('/') ? MESSAGES_PATH.slice(1) : MESSAGES_PATH;
  return new URL(baseURL + path);
}

// Ports the fetch standard blocks ("bad port"), so the SDK's fetch refuses them.
const BAD_PORTS = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102,
  103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465,
  512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993,
  995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668,
  6669, 6679, 6697, 10080,
]);

/**
 * Why fetch would refuse this URL before any traffic, or nothing. The undici transport refuses
 * the same URLs with the same words, so a base URL that works on one transport works on the
 * other, and `classify` names the refusal the same way for both.
 */
export function fetchRefusal(url: URL): Error | undefined {
  if (url.username !== '' || url.password !== '') {
    return new TypeError('Request cannot be constructed from a URL that includes credentials');
  }
  if (url.port !== '' && BAD_PORTS.has(Number(url.port))) return new Error('bad port');
  return undefined;
}
