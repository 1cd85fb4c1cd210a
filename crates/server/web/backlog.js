// Loading the pending actions: the longest waiting first, up to a bound.
//
// A queue longer than the bound is loaded from its oldest end (the items
// nearest their deadline and their escalation), the stream brings what
// arrives after, and what lies between is loaded as the operator works the
// queue down. While a load was cut short the page says so ("2000+"), and
// a resync forgets only the items the load covered.

import { api } from './api.js';

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

/** Whether a load that read up to `last` (oldest first) could have seen
 * action `id`: only then does its absence mean it was settled. Ids sort in
 * the order the daemon lists them. */
export function covered(load, id) {
  return load.complete || (load.last !== null && id <= load.last);
}
