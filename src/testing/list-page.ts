/**
 * The real API's paging of a list endpoint (`GET /v1/models`, `GET /v1/messages/batches`):
 * `limit` (1 to 1,000, default 20), one cursor of `after_id` or `before_id`, and an answer
 * of `data`, `has_more`, `first_id` and `last_id`, which the SDK's `Page` walks.
 */

/** One page of a listing, in the wire shape. */
export interface ListPage<T> {
  data: T[];
  has_more: boolean;
  first_id: string | null;
  last_id: string | null;
}

/** A page, or the message of a 400 for a bad query. */
export type PageOutcome<T> = { ok: true; page: ListPage<T> } | { ok: false; message: string };

function badLimit(text: string | null): { ok: false; message: string } {
  return {
    ok: false,
    message: `Expected \`limit\` to be an integer from 1 to 1000, got \`${text}\``,
  };
}

/**
 * The page of `items` (in listing order) that `query` asks for. `after_id` pages forward
 * from an item, `before_id` back from one; `cursorName` says what a cursor must be, for
 * the 400 of one that is not in the listing (`a model id of this listing`).
 */
export function pageOf<T>(
  items: readonly T[],
  query: URLSearchParams,
  idOf: (item: T) => string,
  cursorName: string,
): PageOutcome<T> {
  const limitText = query.get('limit');
  if (limitText !== null && !/^\d{1,4}$/.test(limitText)) return badLimit(limitText);
  const limit = limitText === null ? 20 : Number(limitText);
  if (limit < 1 || limit > 1000) return badLimit(limitText);
  const afterId = query.get('after_id');
  const beforeId = query.get('before_id');
  if (afterId !== null && beforeId !== null) {
    return { ok: false, message: 'Expected at most one of `after_id` and `before_id`, got both' };
  }
  let start = 0;
  let end = items.length;
  const cursor = afterId ?? beforeId;
  if (cursor !== null) {
    const index = items.findIndex((item) => idOf(item) === cursor);
    if (index === -1) {
      return {
        ok: false,
        message: `Expected \`${afterId === null ? 'before_id' : 'after_id'}\` to be ${cursorName}, got \`${cursor}\``,
      };
    }
    if (afterId !== null) start = index + 1;
    else end = index;
  }
  const slice =
    beforeId !== null
      ? items.slice(Math.max(start, end - limit), end)
      : items.slice(start, Math.min(end, start + limit));
  const hasMore = beforeId !== null ? end - slice.length > 0 : start + slice.length < end;
  const first = slice[0];
  const last = slice.at(-1);
  return {
    ok: true,
    page: {
      data: slice,
      has_more: hasMore,
      first_id: first === undefined ? null : idOf(first),
      last_id: last === undefined ? null : idOf(last),
    },
  };
}
