// What every page shares: its lifetime (timers stop when the operator navigates away) and how
// an API failure is shown (401 and 403 named as such, 429 with its wait).

import { ApiFailure } from "./api.js";
import { h } from "./dom.js";

let generation = 0;

/** A new page lifetime: the previous page's timers stop at their next tick. While the tab is
 * hidden no timer calls its function: it waits, and runs as soon as the tab shows again. */
export function newLifetime() {
  generation += 1;
  const mine = generation;
  const alive = () => mine === generation;
  /** Call `fn` once, `ms` from now, if this page is still shown (at once when the tab shows
   * again, if it was hidden meanwhile). Returns `fn`'s result, false on failure or when the
   * page is gone. */
  const after = (ms, fn) =>
    new Promise((resolve) => {
      const tick = async () => {
        if (!alive()) return resolve(false);
        if (document.hidden) {
          document.addEventListener("visibilitychange", tick, { once: true });
          return undefined;
        }
        try {
          return resolve(await fn());
        } catch {
          return resolve(false); // a failed refresh: the page keeps its last good state
        }
      };
      setTimeout(tick, ms);
    });
  return {
    alive,
    after,
    /** Call `fn` every `ms` while this page is shown and `fn` returns true (a failed call
     * tries again). */
    repeat(ms, fn) {
      const again = async () => {
        const more = await after(ms, async () => {
          try {
            return await fn();
          } catch {
            return true;
          }
        });
        if (more && alive()) again();
      };
      again();
    },
  };
}

/** What a failure means to the operator, as text. */
export function describe(error) {
  if (!(error instanceof ApiFailure)) return `The request failed: ${error.message || error}`;
  if (error.status === 401) return `401 Unauthorized: ${error.detail || "a valid token is required"}`;
  if (error.status === 403) return `403 Forbidden: ${error.detail || "the token may not do this"}`;
  if (error.status === 429) {
    const wait = error.retryAfter ? ` (Retry-After: ${error.retryAfter} s)` : "";
    return `429 Too Many Requests: ${error.detail}${wait}`;
  }
  return error.message;
}

/** A failure box: the description, then each field error of a §2.2 body. */
export function failureBox(error) {
  const status = error instanceof ApiFailure ? error.status : 0;
  const fields = error instanceof ApiFailure && error.fields ? Object.entries(error.fields) : [];
  return h(
    "div",
    { class: "failure", "data-status": status },
    h("p", {}, describe(error)),
    fields.length ? h("ul", {}, fields.map(([k, v]) => h("li", {}, `${k}: ${v}`))) : null,
  );
}
