import type { Violations } from "./errors.js";

export interface Page {
  limit: number;
  offset: number;
}

export interface PageResult<T> {
  items: T[];
  hasMore: boolean;
}

export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;

/**
 * Checks `limit` (1..100, default 20) and `offset` (>= 0, default 0). Out-of-range values are
 * reported, never clamped (DESIGN §4).
 */
export function checkPage(limit: number | undefined, offset: number | undefined, v: Violations): Page {
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)) {
    v.add("limit", `must be an integer from 1 to ${MAX_LIMIT}`);
  }
  if (offset !== undefined && (!Number.isInteger(offset) || offset < 0)) {
    v.add("offset", "must be an integer of at least 0");
  }
  return { limit: limit ?? DEFAULT_LIMIT, offset: offset ?? 0 };
}

/** Stores fetch `limit + 1` rows; the extra row only tells whether another page exists. */
export function toPageResult<T>(rows: T[], page: Page): PageResult<T> {
  return { items: rows.slice(0, page.limit), hasMore: rows.length > page.limit };
}
