// The event feed (§2.12), newest first, filterable by type, live: new events are fetched
// every few seconds after the newest one shown.

import { append, h, jsonBlock, replace, table, when } from "./dom.js";
import { eventsAfter, newestEvents } from "./feed.js";
import { failureBox } from "./view.js";

const SHOWN = 50;
const LIVE_MS = 3000;
const TYPES = ["", "completed", "failed"];

/** A completed event's result path (plain), or a failed one's error text (error style). */
function summary(data) {
  if (!data || typeof data !== "object") return "";
  if (data.result && typeof data.result.path === "string") {
    return h("span", { class: "mono result-path" }, data.result.path);
  }
  const error = data.metadata && data.metadata.error;
  return error && typeof error.message === "string" ? h("span", { class: "error-text" }, error.message) : "";
}

function eventRow(item) {
  const data = item.data || {};
  return [
    h("span", { class: "mono" }, item.cursor),
    item.routingKey,
    data.job_id ? h("a", { href: `#/jobs/${encodeURIComponent(data.job_id)}`, class: "mono" }, data.job_id) : "",
    data.metadata && data.metadata.source !== undefined ? String(data.metadata.source) : "",
    when(item.createdAt),
    summary(data),
    h("details", {}, h("summary", {}, "payload"), jsonBlock(data)),
  ];
}

/** `#/events?type=failed`. */
export async function eventsView(root, params, life) {
  const type = TYPES.includes(params.get("type") || "") ? params.get("type") || "" : "";
  const select = h("select", { name: "type", id: "event-type" },
    TYPES.map((t) => h("option", { value: t, selected: t === type }, t || "all types")));
  select.addEventListener("change", () => {
    window.location.hash = select.value ? `#/events?type=${select.value}` : "#/events";
  });
  const listing = h("div", { id: "event-list" });
  replace(root, h("h1", {}, "Events"), h("p", { class: "filters" }, h("label", {}, "Type ", select)), listing);
  const shown = [];

  function render() {
    replace(listing, shown.length
      ? table(["Cursor", "Type", "Job", "Source", "Written", "Result or error", "Data"], shown.map(eventRow))
      : h("p", { class: "muted" }, "No event yet."));
  }

  try {
    const first = await newestEvents(SHOWN, type || undefined);
    shown.push(...first.items);
    let last = first.last;
    render();
    life.repeat(LIVE_MS, async () => {
      const fresh = await eventsAfter(last, type || undefined);
      if (fresh.items.length && life.alive()) {
        shown.unshift(...fresh.items);
        shown.length = Math.min(shown.length, SHOWN);
        last = fresh.last;
        render();
      }
      return true;
    });
  } catch (error) {
    append(listing, [failureBox(error)]);
  }
}
