// Loading the pending items: the longest waiting first, up to a bound.
//
// A queue longer than the bound is loaded from its oldest end (the items
// nearest their deadline and their escalation), the stream brings what
// arrives after, and what lies between is loaded as the operator works the
// queue down. While a load was cut short the page says so ("2000+"), and
// a resync forgets only the items the load covered. Grant requests and
// plans load the same way, a page at a time (up to MOST_PAGES pages).

import { api, apiPage } from './api.js';

/** Most pending actions one load reads. */
export const MOST = 2000;

/** The pending actions, oldest first: `{ items, complete, last }`, where
 * `complete` says the load reached the queue's end and `last` is the id of
 * the newest item read (items after it were not looked at). */
export async function pendingActions(most = MOST) {
  const items = [];
  let cursor = null;
  do {
    const q = new URLSearchParams({ status: 'pending', limit: '200', order: 'oldest' });
    if (cursor) q.set('cursor', cursor);
    const page = await api('GET', `/v1/actions?${q}`);
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor && items.length < most);
  return { items, complete: !cursor, last: items.length ? items[items.length - 1].id : null };
}

/** Most pages of pending grant requests or plans one load reads. */
export const MOST_PAGES = 20;

/** The pending items of a listing answered as a bare array (`path`:
 * grant requests, plans), oldest first, `limit` a page, each page after the
 * last id of the one before, until a short page that links no next one
 * or `pages` pages:
 * `{ items, complete, last }` as `pendingActions` answers. */
export async function pendingPages(path, limit, pages = MOST_PAGES) {
  const items = [];
  for (let n = 0; n < pages; n++) {
    const q = new URLSearchParams({ status: 'pending', order: 'oldest', limit: String(limit) });
    if (items.length) q.set('after', items[items.length - 1].id);
    const { items: page, next } = await apiPage(`${path}?${q}`);
    items.push(...page);
    // A page cut short for its size links the next one.
    if (!page.length || (page.length < limit && !next)) {
      return { items, complete: true, last: items.length ? items[items.length - 1].id : null };
    }
  }
  console.warn(`${path}: stopped after ${pages} pages of ${limit} pending items; newer ones show as they arrive`);
  return { items, complete: false, last: items.length ? items[items.length - 1].id : null };
}

/** Whether a load that read up to `last` (oldest first) could have seen
 * action `id`: only then does its absence mean it was settled. Ids sort in
 * the order the daemon lists them. */
export function covered(load, id) {
  return load.complete || (load.last !== null && id <= load.last);
}
