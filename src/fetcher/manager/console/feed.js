// Reading the §2.12 event feed, which only reads forward (`after` a cursor, ascending).
//
// The console needs the newest events and the events of one job without reading the whole
// feed (7 days of events, pages of up to 4 MiB). Cursors are feed sequence numbers (decimal,
// increasing), and `GET /v1/events?after=N&limit=1` says whether anything lies after N and
// what comes first, so both are found by search with one-item pages: O(log n) small requests,
// then one forward read of the part that is shown.

import { request } from "./api.js";

const FEED = "/v1/events";
// Cursors are at most 18 digits; a JS number is exact to 2^53, which a feed does not reach.
const MAX_CURSOR = 2 ** 52;
const JOB_WINDOW_MS = 60_000;

async function firstAfter(after, type) {
  const page = await request(FEED, { query: { after, limit: 1, type } });
  return page.items.length ? page.items[0] : null;
}

/** The newest visible cursor (0 for an empty feed): exponential, then binary search. */
export async function lastCursor(type) {
  if (!(await firstAfter(0, type))) return 0;
  let lo = 0; // something lies after lo
  let hi = 1;
  while (hi < MAX_CURSOR && (await firstAfter(hi, type))) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (await firstAfter(mid, type)) lo = mid;
    else hi = mid;
  }
  return hi; // something after hi - 1, nothing after hi: the item with cursor hi
}

/** Every visible item with a cursor in (after, last], ascending; `stop(item)` ends early. */
async function readForward(after, last, type, stop = () => false) {
  const items = [];
  let cursor = after;
  while (cursor < last) {
    const page = await request(FEED, { query: { after: cursor, limit: 1000, type } });
    for (const item of page.items) {
      if (stop(item)) return items;
      items.push(item);
    }
    if (!page.items.length) break;
    cursor = Number(page.next);
  }
  return items;
}

/** Up to `count` of the newest events (of `type` when given), newest first. */
export async function newestEvents(count, type) {
  const last = await lastCursor(type);
  let span = count;
  for (;;) {
    const after = Math.max(0, last - span);
    const items = await readForward(after, last, type);
    if (items.length >= count || after === 0) return { items: items.slice(-count).reverse(), last };
    span *= 4; // other tenants' or products' events, or the other type, leave gaps
  }
}

/** Events newer than `after` (for a live view), newest first. */
export async function eventsAfter(after, type) {
  const page = await request(FEED, { query: { after, limit: 100, type } });
  return { items: [...page.items].reverse(), last: Number(page.next) };
}

function createdMs(item) {
  return new Date(item.createdAt).getTime();
}

/** The feed items of `job` (terminal events are written when it ends): the first cursor at or
 * after its creation is found by bisection, then the feed is read up to its completion. */
export async function eventsOfJob(job) {
  if (!job.completedAt) return [];
  const since = new Date(job.createdAt).getTime() - JOB_WINDOW_MS;
  const until = new Date(job.completedAt).getTime() + JOB_WINDOW_MS;
  const last = await lastCursor();
  let lo = 0;
  let hi = last;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    const item = await firstAfter(mid);
    if (!item || createdMs(item) >= since) hi = mid;
    else lo = mid + 1;
  }
  const items = await readForward(lo, last, undefined, (item) => createdMs(item) > until);
  return items.filter((item) => item.data && item.data.job_id === job.id);
}
