// The token and every request the page makes: fetch with a bearer header, and the event stream.

/**
 * The token, from the address's `?token=`. It stays in the address: a reload, or the address
 * copied to another tab, opens the page again with it. (A cookie would do the same, but a
 * cookie is sent to every server on this host, whatever its port.)
 */
export function takeToken() {
  return new URL(location.href).searchParams.get('token') ?? '';
}

/** The error text of a JSON answer that was not 2xx, or the status line. */
async function errorOf(response) {
  try {
    const body = await response.json();
    if (body && typeof body.error === 'string') return body.error;
  } catch {
    // Not JSON: fall back to the status.
  }
  return `${response.status} ${response.statusText}`.trim();
}

export class Api {
  #token;

  constructor(token) {
    this.#token = token;
  }

  #headers() {
    return { Authorization: `Bearer ${this.#token}`, Accept: 'application/json' };
  }

  /** GET a JSON route; throws an Error with the server's own message when not 2xx. */
  async get(path, signal) {
    const response = await fetch(path, { headers: this.#headers(), signal, cache: 'no-store' });
    if (!response.ok) throw new Error(await errorOf(response));
    return response.json();
  }

  /** GET /api/agents/ID */
  agent(id, signal) {
    return this.get(`/api/agents/${encodeURIComponent(id)}`, signal);
  }

  /** POST /api/agents/ID/cancel: resolves to the answer's body; throws with its error text. */
  async cancel(id) {
    const response = await fetch(`/api/agents/${encodeURIComponent(id)}/cancel`, {
      method: 'POST',
      headers: this.#headers(),
      cache: 'no-store',
    });
    if (!response.ok) throw new Error(await errorOf(response));
    return response.json();
  }

  /**
   * Opens the event stream. EventSource cannot send headers, so the token rides in the query.
   * `handlers`: { state, delta, end, open, error } — each optional.
   */
  events(handlers) {
    const source = new EventSource(`/api/events?token=${encodeURIComponent(this.#token)}`);
    const parse = (handler) => (event) => {
      if (!handler) return;
      let data;
      try {
        data = JSON.parse(event.data);
      } catch {
        return;
      }
      handler(data);
    };
    source.addEventListener('state', parse(handlers.state));
    source.addEventListener('delta', parse(handlers.delta));
    source.addEventListener('end', (event) => {
      // The run is over: close before the server's close makes EventSource reconnect.
      source.close();
      handlers.end?.(event.data ? safeParse(event.data) : undefined);
    });
    source.addEventListener('open', () => handlers.open?.());
    source.addEventListener('error', () => handlers.error?.(source));
    return source;
  }
}

function safeParse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
