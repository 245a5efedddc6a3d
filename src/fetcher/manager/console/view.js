// What every page shares: its lifetime (timers stop when the operator navigates away) and how
// an API failure is shown (401 and 403 named as such, 429 with its wait).

import { ApiFailure } from "./api.js";
import { h } from "./dom.js";

let generation = 0;

/** A new page lifetime: the previous page's timers stop at their next tick. */
export function newLifetime() {
  generation += 1;
  const mine = generation;
  return {
    alive: () => mine === generation,
    /** Call `fn` every `ms` while this page is shown and `fn` returns true. */
    repeat(ms, fn) {
      const tick = async () => {
        if (mine !== generation) return;
        let again = false;
        try {
          again = await fn();
        } catch {
          again = true; // a failed refresh tries again; the page shows the last good state
        }
        if (again && mine === generation) setTimeout(tick, ms);
      };
      setTimeout(tick, ms);
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
