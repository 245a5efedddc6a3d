// Connections: the list (§2.6.2), a connection's page (§2.6.4: the API never returns a
// password or key, and the page shows only the named fields anyway), its Test button (§2.6.7,
// a 429 shown as the rate limit it is) and a schema browser (§2.6.8).

import { request } from "./api.js";
import { append, facts, h, jsonBlock, replace, table, when } from "./dom.js";
import { failureBox } from "./view.js";

const PAGE_SIZE = 20;
const BASE = "/v1/management/connections";

function connectionRow(c) {
  return [
    h("a", { href: `#/connections/${encodeURIComponent(c.id)}`, class: "conn-link" }, c.configName),
    c.type,
    c.productName || (c.internal ? "internal" : "unassigned"),
    c.host ? `${c.host}:${c.port}` : "",
    c.databaseName || "",
    when(c.createdAt),
  ];
}

/** `#/connections?page=N`. */
export async function connectionsView(root, params) {
  const page = Math.max(1, Number.parseInt(params.get("page") || "1", 10) || 1);
  const listing = h("div", { id: "connection-list" });
  replace(root, h("h1", {}, "Connections"), listing);
  try {
    const body = await request(BASE, { query: { page, limit: PAGE_SIZE } });
    const last = Math.max(1, Math.ceil(body.total / PAGE_SIZE));
    replace(
      listing,
      body.items.length
        ? table(["Name", "Type", "Product", "Host", "Database", "Created"], body.items.map(connectionRow))
        : h("p", { class: "muted" }, "No connection."),
      h("p", { class: "pager" },
        page > 1 ? h("a", { href: `#/connections?page=${page - 1}` }, "← Previous") : null,
        ` page ${page} of ${last} (${body.total}) `,
        page < last ? h("a", { href: `#/connections?page=${page + 1}` }, "Next →") : null),
    );
  } catch (error) {
    replace(listing, failureBox(error));
  }
}

function connectionFacts(c) {
  return facts([
    ["Name", h("span", { id: "conn-name" }, c.configName)],
    ["ID", h("span", { class: "mono" }, c.id)],
    ["Type", c.type],
    ["Product", c.productName],
    ["Internal", c.internal ? "yes (configured by environment)" : "no"],
    ["Host", c.host],
    ["Port", c.port],
    ["Database", c.databaseName],
    ["Schema", c.schema],
    ["User", c.userName],
    ["TLS mode", c.ssl && typeof c.ssl.mode === "string" ? c.ssl.mode : ""],
    ["Created by", c.createdBy],
    ["Created", when(c.createdAt)],
    ["Updated", when(c.updatedAt)],
  ]);
}

function testPanel(id) {
  const result = h("div", { id: "test-result", "aria-live": "polite" });
  const button = h("button", { type: "button", id: "test-connection" }, "Test");
  button.addEventListener("click", async () => {
    button.disabled = true;
    replace(result, h("p", { class: "muted" }, "Testing…"));
    try {
      const r = await request(`${BASE}/${encodeURIComponent(id)}/test`, { method: "POST" });
      replace(result, h("p", { class: `test test-${r.status === "success" ? "ok" : "bad"}` },
        `${r.status}: ${r.message} (${r.latencyMs} ms)`));
    } catch (error) {
      replace(result, failureBox(error));
    } finally {
      button.disabled = false;
    }
  });
  return h("section", {}, h("h2", {}, "Test"), h("p", {}, button), result);
}

/** A field's type as the source names it (`types`, issue 33), or "". */
function typeOf(table, field) {
  const types = table.types && typeof table.types === "object" ? table.types : {};
  return typeof types[field] === "string" ? types[field] : "";
}

function fieldItem(table, field) {
  const type = typeOf(table, field);
  return h("li", { class: "mono field" }, field, type ? h("span", { class: "field-type" }, ` ${type}`) : null);
}

function schemaTables(schema, filter) {
  const needle = filter.trim().toLowerCase();
  const tables = schema.tables.filter(
    (t) => !needle || t.name.toLowerCase().includes(needle) || t.fields.some((f) => f.toLowerCase().includes(needle)),
  );
  if (!tables.length) return h("p", { class: "muted" }, "No table matches.");
  return h("ul", { class: "schema" },
    tables.map((t) => h("li", {}, h("details", {}, h("summary", {}, `${t.name} (${t.fields.length})`),
      h("ul", {}, t.fields.map((f) => fieldItem(t, f)))))));
}

function schemaPanel(id) {
  const schemas = h("input", {
    type: "text", name: "schemas", id: "schema-names", placeholder: "optional, comma-separated",
  });
  const filter = h("input", { type: "search", name: "filter", id: "schema-filter", placeholder: "table or field" });
  const load = h("button", { type: "button", id: "load-schema" }, "Browse schema");
  const out = h("div", { id: "schema" });
  let loaded = null;
  load.addEventListener("click", async () => {
    load.disabled = true;
    replace(out, h("p", { class: "muted" }, "Discovering…"));
    try {
      loaded = await request(`${BASE}/${encodeURIComponent(id)}/schema`, { query: { schemas: schemas.value.trim() } });
      replace(out, schemaTables(loaded, filter.value));
    } catch (error) {
      replace(out, failureBox(error));
    } finally {
      load.disabled = false;
    }
  });
  filter.addEventListener("input", () => loaded && replace(out, schemaTables(loaded, filter.value)));
  return h("section", {}, h("h2", {}, "Schema"),
    h("p", { class: "row" },
      h("label", { for: "schema-names" }, "Schemas "), schemas, load,
      h("label", { for: "schema-filter" }, "Filter "), filter),
    out);
}

/** `#/connections/<id>`. */
export async function connectionView(root, id) {
  const body = h("div", { id: "connection-page" });
  replace(root, h("p", {}, h("a", { href: "#/connections" }, "← Connections")), h("h1", {}, "Connection"), body);
  try {
    const c = await request(`${BASE}/${encodeURIComponent(id)}`);
    replace(
      body,
      connectionFacts(c),
      c.metadata ? h("section", {}, h("h2", {}, "Metadata"), jsonBlock(c.metadata)) : null,
      h("p", {}, h("a", { href: `#/jobs?connectionId=${encodeURIComponent(c.id)}` }, "Jobs of this connection")),
    );
    append(body, [testPanel(c.id), schemaPanel(c.id)]);
  } catch (error) {
    replace(body, failureBox(error));
  }
}
