// Jobs: the list (`GET /v1/fetcher` with filters and a cursor) and a job's page
// (`GET /v1/fetcher/{id}` and its feed events). The list refreshes itself all the time (every
// 2 s while a listed job runs, every 5 s otherwise, so a new job shows without a reload); a
// job's page until the job ends. Nothing is requested while the tab is hidden.

import { config, download, request } from "./api.js";
import { append, badge, duration, facts, h, jsonBlock, replace, table, when } from "./dom.js";
import { eventsOfJob } from "./feed.js";
import { failureBox } from "./view.js";

const STATUSES = ["pending", "processing", "completed", "failed", "canceled"];
const PAGE_SIZE = 20;
const LIVE_MS = 2000;
const IDLE_MS = 5000;
// The list route has no correlationId filter: the console matches it itself, reading this
// many API pages of the other filters' jobs per page it shows (and says how many it read).
const SEARCH_PAGES = 10;
const ERROR_PREVIEW = 160;

const running = (job) => job.status === "pending" || job.status === "processing";
const errorOf = (job) => (job.metadata && typeof job.metadata.error === "string" ? job.metadata.error : "");

function preview(text) {
  return text.length > ERROR_PREVIEW ? `${text.slice(0, ERROR_PREVIEW)}…` : text;
}

function datasources(job) {
  const mapped = job.mappedFields;
  if (mapped && typeof mapped === "object") return Object.keys(mapped).join(", ");
  // The list leaves out a request over 4 KiB and names it in `truncated`; the job page has it.
  return Array.isArray(job.truncated) && job.truncated.includes("mappedFields") ? "(on the job page)" : "";
}

function jobRow(job) {
  return [
    badge(job.status),
    h("a", { href: `#/jobs/${encodeURIComponent(job.id)}`, class: "mono" }, job.id),
    job.metadata && job.metadata.source !== undefined ? String(job.metadata.source) : "",
    datasources(job),
    h("span", { class: "when" }, when(job.createdAt)),
    h("span", { class: "when" }, job.completedAt ? duration(job.createdAt, job.completedAt) : ""),
    h("span", { class: "error-text" }, preview(errorOf(job))),
  ];
}

/** The filters as the list route's query (`status` comma-separated). */
function listQuery(filters, cursor) {
  return {
    status: filters.status.join(","),
    connectionId: filters.connectionId,
    createdFrom: filters.createdFrom,
    createdTo: filters.createdTo,
    limit: PAGE_SIZE,
    cursor,
  };
}

/** The product filter is the `X-Product-Name` header (docs/jobs.md). */
function listHeader(filters) {
  return filters.product ? { "X-Product-Name": filters.product } : {};
}

const TEXT_FILTERS = ["product", "correlationId", "connectionId", "createdFrom", "createdTo"];

/** Whether `job` passes the filters the console applies itself (`correlationId`). */
function matches(filters, job) {
  if (!filters.correlationId) return true;
  const value = job.metadata ? job.metadata.correlationId : undefined;
  return value !== undefined && value !== null && String(value) === filters.correlationId;
}

function filtersFrom(params) {
  const status = (params.get("status") || "").split(",").filter((s) => STATUSES.includes(s));
  const filters = { status };
  for (const name of TEXT_FILTERS) filters[name] = params.get(name) || "";
  return filters;
}

function filterHash(form) {
  const params = new URLSearchParams();
  const status = STATUSES.filter((s) => form.querySelector(`input[name=status][value=${s}]`).checked);
  if (status.length) params.set("status", status.join(","));
  for (const name of TEXT_FILTERS) {
    const value = form.querySelector(`[name=${name}]`).value.trim();
    if (value) params.set(name, value);
  }
  const query = params.toString();
  return `#/jobs${query ? `?${query}` : ""}`;
}

async function connectionOptions(selected) {
  const options = [h("option", { value: "" }, "any connection")];
  try {
    const page = await request("/v1/management/connections", { query: { limit: 100 } });
    for (const c of page.items) {
      options.push(h("option", { value: c.id, selected: c.id === selected }, `${c.configName} (${c.type})`));
    }
  } catch {
    // Without connections:read the filter still takes an ID typed in the address.
    if (selected) options.push(h("option", { value: selected, selected: true }, selected));
  }
  return options;
}

async function filterForm(filters) {
  const form = h(
    "div",
    { class: "filters", id: "job-filters" },
    h("fieldset", {}, h("legend", {}, "Status"),
      STATUSES.map((s) =>
        h("label", { class: "check" },
          h("input", { type: "checkbox", name: "status", value: s, checked: filters.status.includes(s) }), s),
      ),
    ),
    h("label", {}, "Product ", h("input", { type: "text", name: "product", value: filters.product, size: 14 })),
    h("label", {}, "Correlation ID ",
      h("input", { type: "text", name: "correlationId", value: filters.correlationId, size: 18 })),
    h("label", {}, "Connection ", h("select", { name: "connectionId" }, await connectionOptions(filters.connectionId))),
    h("label", {}, "Created from (UTC) ", h("input", { type: "date", name: "createdFrom", value: filters.createdFrom })),
    h("label", {}, "to ", h("input", { type: "date", name: "createdTo", value: filters.createdTo })),
  );
  const apply = h("button", { type: "button", id: "apply-filters" }, "Apply");
  apply.addEventListener("click", () => {
    window.location.hash = filterHash(form);
  });
  return append(form, [apply]);
}

/** `#/jobs?status=…`: the list, refreshed every 2 s while a listed job is pending or
 * processing and every 5 s otherwise. */
export async function jobsView(root, params, life) {
  const filters = filtersFrom(params);
  const listing = h("div", { id: "job-list" });
  const more = h("button", { type: "button", id: "more-jobs", hidden: true }, "More");
  const searched = h("p", { class: "muted", id: "job-search-note", hidden: true });
  const form = await filterForm(filters);
  if (!life.alive()) return; // the operator moved on while the connections loaded
  replace(root, h("h1", {}, "Jobs"), form, searched, listing, more);
  const state = { items: [], cursor: null, pages: 0, read: 0 };

  async function load(pages) {
    let items = [];
    let cursor = null;
    let read = 0;
    const reads = filters.correlationId ? pages * SEARCH_PAGES : pages;
    for (let i = 0; i < reads; i += 1) {
      const page = await request("/v1/fetcher", { query: listQuery(filters, cursor), header: listHeader(filters) });
      read += page.items.length;
      items = items.concat(page.items.filter((job) => matches(filters, job)));
      cursor = page.nextCursor;
      if (!cursor) break;
    }
    if (!life.alive()) return false;
    Object.assign(state, { items, cursor, pages, read });
    render();
    return state.items.some(running);
  }

  function render() {
    const rows = state.items.map(jobRow);
    replace(listing, rows.length
      ? table(["Status", "Job", "Source", "Datasources", "Created", "Took", "Error"], rows, { class: "jobs" })
      : h("p", { class: "muted" }, "No job matches these filters."));
    more.hidden = !state.cursor;
    searched.hidden = !filters.correlationId;
    replace(searched, `Correlation ID matched in the browser over the newest ${state.read} jobs of the other `
      + `filters${state.cursor ? "; More searches older ones" : " (all of them)"}.`);
  }

  // Refresh every loaded page: sooner while one of their jobs runs. A failed refresh keeps the
  // last good list and tries again.
  function watch(anyRunning) {
    life.after(anyRunning ? LIVE_MS : IDLE_MS, async () => {
      let again = false;
      try {
        again = await load(state.pages);
      } finally {
        watch(again);
      }
    });
  }

  more.addEventListener("click", () =>
    load(state.pages + 1).catch((e) => append(listing, [failureBox(e)])));
  try {
    watch(await load(1));
  } catch (error) {
    replace(listing, failureBox(error));
    watch(false);
  }
}

function submitted(job) {
  const body = { mappedFields: job.mappedFields };
  if (job.filters) body.filters = job.filters;
  if (job.limits) body.limits = job.limits;
  return body;
}

function eventRows(events) {
  return events.map((e) => [
    h("span", { class: "mono" }, e.cursor),
    e.routingKey,
    when(e.createdAt),
    e.publishedAt ? when(e.publishedAt) : "not yet",
    h("details", {}, h("summary", {}, "payload"), jsonBlock(e.data)),
  ]);
}

const TRACE_ID = /^[0-9a-f]{32}$/;

/** §15.3: the job's trace ID, a link when TRACE_URL_TEMPLATE is set; "not traced" when null. */
function traceLink(job) {
  const id = job.traceId;
  if (typeof id !== "string" || !TRACE_ID.test(id)) return h("span", { class: "muted", id: "trace-id" }, "not traced");
  const template = config().traceUrlTemplate;
  if (typeof template !== "string") return h("span", { class: "mono", id: "trace-id" }, id);
  const href = template.replace("{traceId}", id);
  return h("a", { class: "mono", id: "trace-id", href, target: "_blank", rel: "noopener noreferrer" }, id);
}

function jobFacts(job) {
  return facts([
    ["Status", badge(job.status)],
    ["ID", h("span", { class: "mono" }, job.id)],
    ["Source", job.metadata ? job.metadata.source : ""],
    ["Created", when(job.createdAt)],
    ["Completed", when(job.completedAt)],
    ["Took", job.completedAt ? duration(job.createdAt, job.completedAt) : ""],
    ["Created by", job.createdBy],
    ["Trace", traceLink(job)],
    ["Request hash", h("span", { class: "mono" }, job.requestHash)],
    ["Result path", job.resultPath ? h("span", { class: "mono", id: "result-path" }, job.resultPath) : ""],
    ["Result HMAC", job.resultHmac ? h("span", { class: "mono" }, job.resultHmac) : ""],
  ]);
}

function mib(bytes) {
  return bytes === undefined ? "" : `${bytes} bytes (${(bytes / 1048576).toFixed(1)} MiB)`;
}

/** §14.1 summary: sizes, rows per datasource and table, key version, expiry; and a button
 * that downloads the encrypted object through GET /v1/fetcher/{id}/result (§14.2) with the
 * console's token, saved as a file (it is ciphertext: the consumer decrypts it). */
function resultSection(job) {
  const result = job.result;
  if (!result) return null;
  const tables = Object.entries(result.tables || {}).flatMap(([ds, counts]) =>
    Object.entries(counts).map(([table, rows]) => [ds, table, String(rows)]));
  const status = h("span", { id: "download-status", class: "muted" });
  const button = h("button", { type: "button", id: "download-result" }, "Download encrypted object");
  button.addEventListener("click", async () => {
    replace(status, "downloading…");
    try {
      const blob = await download(`/v1/fetcher/${encodeURIComponent(job.id)}/result`);
      const link = h("a", { href: URL.createObjectURL(blob), download: `${job.id}.json.enc`, id: "download-link" },
        `${job.id}.json.enc`);
      replace(status, `${blob.size} bytes: `, link);
      link.click();
    } catch (error) {
      replace(status, failureBox(error));
    }
  });
  return h("section", { id: "job-result" }, h("h2", {}, "Result"),
    facts([
      ["Stored size", mib(result.sizeBytes)],
      ["Plaintext size", mib(result.plaintextBytes)],
      ["Rows", result.rowCount === undefined ? "" : String(result.rowCount)],
      ["Key version", result.keyVersion || ""],
      ["Expires", result.expiresAt ? when(result.expiresAt) : "never"],
      ["Expired", result.expiredAt ? when(result.expiredAt) : ""],
    ]),
    tables.length ? table(["Datasource", "Table", "Rows"], tables, { id: "result-tables" }) : null,
    h("p", {}, button, " ", status));
}

/** §14.4: a running job's Cancel button. `done(notice)` gets the API's answer to show: the
 * canceled job's confirmation, or the §2.2 error as such (409 FET-1104 when it ended first). */
function cancelSection(job, done) {
  if (!running(job)) return null;
  const button = h("button", { type: "button", id: "cancel-job" }, "Cancel job");
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const answer = await request(`/v1/fetcher/${encodeURIComponent(job.id)}/cancel`, { method: "POST" });
      done(h("p", { id: "job-notice", class: "notice" }, `Canceled: the job is now ${answer.status}.`));
    } catch (error) {
      done(h("div", { id: "job-notice" }, failureBox(error)));
    }
  });
  return h("p", {}, button);
}

/** §14.5: a failed or canceled job's Retry button. `done(notice)` gets the API's answer: a
 * link to the new job (or the identical active one it matched), or the §2.2 error as such. */
function retrySection(job, done) {
  if (job.status !== "failed" && job.status !== "canceled") return null;
  const button = h("button", { type: "button", id: "retry-job" }, "Retry job");
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const answer = await request(`/v1/fetcher/${encodeURIComponent(job.id)}/retry`, { method: "POST" });
      done(h("p", { id: "job-notice", class: "notice" }, `${answer.message}: `,
        h("a", { href: `#/jobs/${encodeURIComponent(answer.jobId)}`, id: "retried-job" }, answer.jobId)));
    } catch (error) {
      done(h("div", { id: "job-notice" }, failureBox(error)));
    }
  });
  return h("p", {}, button);
}

/** The job's events as a table, or why there is none (a token may read jobs but not events). */
async function jobEvents(job) {
  if (running(job)) return h("p", { class: "muted" }, "The job is still running.");
  try {
    const events = await eventsOfJob(job);
    return events.length
      ? table(["Cursor", "Type", "Written", "Published", "Data"], eventRows(events))
      : h("p", { class: "muted" }, "No event in the feed.");
  } catch (error) {
    return failureBox(error);
  }
}

/** `#/jobs/<id>`: the job, its request and its events; live until it ends. */
export async function jobView(root, id, life) {
  const body = h("div", { id: "job-page" });
  replace(root, h("p", {}, h("a", { href: "#/jobs" }, "← Jobs")), h("h1", {}, "Job"), body);

  let notice = null; // the API's answer to the last Cancel or Retry, kept across refreshes
  async function load() {
    const job = await request(`/v1/fetcher/${encodeURIComponent(id)}`);
    const events = await jobEvents(job);
    if (!life.alive()) return false;
    const error = errorOf(job);
    const show = (answer) => {
      notice = answer;
      load().catch((failure) => replace(body, failureBox(failure)));
    };
    replace(
      body,
      notice,
      jobFacts(job),
      job.retryOf ? h("p", {}, "Retry of ", h("a", { href: `#/jobs/${encodeURIComponent(job.retryOf)}`, id: "retry-of" }, job.retryOf)) : null,
      cancelSection(job, show),
      retrySection(job, show),
      error ? h("section", {}, h("h2", {}, "Failure"), h("pre", { class: "error-text", id: "job-error" }, error)) : null,
      resultSection(job),
      h("section", { id: "job-events" }, h("h2", {}, "Events"), events),
      h("section", {}, h("h2", {}, "Request"), jsonBlock(submitted(job))),
      h("section", {}, h("h2", {}, "Metadata"), jsonBlock(job.metadata || {})),
    );
    return running(job);
  }

  try {
    if (await load()) life.repeat(LIVE_MS, load);
  } catch (error) {
    replace(body, failureBox(error));
  }
}
