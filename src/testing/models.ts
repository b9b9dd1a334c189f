/**
 * `GET /v1/models` and `GET /v1/models/{id}`: a fixed catalog, so clients that look a model
 * up before using it work offline. The scripted model answers to any model name in
 * `POST /v1/messages`; only this listing is fixed.
 */
import type { ServerResponse } from 'node:http';
import { type PageOutcome, pageOf } from './list-page.js';
import { sendError } from './response-player.js';

/** The model ids the catalog lists, newest first. */
export const CATALOG_IDS = [
  'claude-opus-4-5-20251101',
  'claude-haiku-4-5-20251001',
  'claude-sonnet-4-5-20250929',
] as const;

// Release dates are not the scripted model's to know: the API allows an epoch value then.
const UNKNOWN_DATE = '1970-01-01T00:00:00Z';

/** A `ModelInfo` object of the catalog. */
export interface ModelInfo {
  type: 'model';
  id: string;
  display_name: string;
  created_at: string;
  capabilities: null;
  deprecated_at: null;
  retires_at: null;
  lifecycle: 'active';
  line: string | null;
  max_input_tokens: number | null;
  max_tokens: number | null;
}

function info(id: string): ModelInfo {
  const line = /^claude-(haiku|sonnet|opus)-/.exec(id)?.[1] ?? null;
  const display = id
    .replace(/-\d{8}$/, '')
    .split('-')
    .map((part) => (/^\d+$/.test(part) ? part : part[0]!.toUpperCase() + part.slice(1)))
    .join(' ')
    .replace(/(\d) (\d)/, '$1.$2');
  return {
    type: 'model',
    id,
    display_name: `${display} (scripted)`,
    created_at: UNKNOWN_DATE,
    capabilities: null,
    deprecated_at: null,
    retires_at: null,
    lifecycle: 'active',
    line,
    max_input_tokens: null,
    max_tokens: null,
  };
}

const CATALOG: ModelInfo[] = CATALOG_IDS.map(info);

/** The catalog entry for `id` or for its alias (the id without its date), or undefined. */
export function findModel(id: string): ModelInfo | undefined {
  return CATALOG.find((model) => model.id === id || model.id.replace(/-\d{8}$/, '') === id);
}

const LIFECYCLES = new Set(['active', 'deprecated', 'retired']);

/** A page of the catalog, or the message of a 400 for a bad query. */
export function listModels(query: URLSearchParams): PageOutcome<ModelInfo> {
  const lifecycles = [...query.getAll('lifecycle[]'), ...query.getAll('lifecycle')];
  const unknown = lifecycles.find((value) => !LIFECYCLES.has(value));
  if (unknown !== undefined) {
    return {
      ok: false,
      message: `Expected \`lifecycle\` to be "active", "deprecated" or "retired", got \`${unknown}\``,
    };
  }
  // Without a filter the API lists active and deprecated models; every entry here is active.
  const listed = lifecycles.length === 0 || lifecycles.includes('active') ? CATALOG : [];
  return pageOf(listed, query, (model) => model.id, 'a model id of this listing');
}

/** Answers `GET /v1/models` (`id` undefined) or `GET /v1/models/{id}`. */
export function answerModels(
  response: ServerResponse,
  requestId: string,
  query: URLSearchParams,
  id: string | undefined,
): void {
  const send = (status: number, body: unknown): void => {
    response.writeHead(status, { 'content-type': 'application/json', 'request-id': requestId });
    response.end(JSON.stringify(body));
  };
  if (id === undefined) {
    const listed = listModels(query);
    if (listed.ok) send(200, listed.page);
    else
      sendError(response, {
        status: 400,
        type: 'invalid_request_error',
        message: listed.message,
        requestId,
      });
    return;
  }
  const model = findModel(id);
  if (model !== undefined) send(200, model);
  else
    sendError(response, {
      status: 404,
      type: 'not_found_error',
      message: `model: ${id}`,
      requestId,
    });
}
