// The console's only way to build DOM. Values are ALWAYS text: a string or a number becomes a
// Text node (document.createTextNode), never parsed as HTML, so a connection named
// `<img src=x onerror=alert(1)>` or a hostile failure text shows as those characters and runs
// nothing. Attribute names come from the code; attribute values go through setAttribute (never
// markup). Event handlers are added with addEventListener (the CSP forbids inline handlers).

/** A Text node holding `value` as characters. */
export function text(value) {
  return document.createTextNode(String(value));
}

/** `h("a", {href: "#/x", class: "c", onclick: fn}, "label", child)`: an element. */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

/** Append children: nodes as they are, strings and numbers as text; null/false skipped. */
export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : text(child));
  }
  return el;
}

/** Replace every child of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A JSON value pretty-printed into a <pre>, as text. */
export function jsonBlock(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

/** A definition list from [label, value] pairs; absent values are left out. */
export function facts(rows) {
  const dl = h("dl", { class: "facts" });
  for (const [label, value] of rows) {
    if (value === undefined || value === null || value === "") continue;
    append(dl, [h("dt", {}, label), h("dd", {}, value)]);
  }
  return dl;
}

/** A status badge (`pending`, `processing`, `completed`, `failed`, …). */
export function badge(status) {
  return h("span", { class: `badge badge-${String(status).replace(/[^a-z]/g, "")}` }, status);
}

/** A table: `columns` are header labels, `rows` arrays of cells (nodes or text). */
export function table(columns, rows, attrs = {}) {
  return h(
    "table",
    attrs,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
    h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) => h("td", {}, c))))),
  );
}

/** An RFC 3339 timestamp in UTC with milliseconds and its zone, as the CLI and the logs write
 * it (`2026-12-07T18:30:05.123Z`); the raw value when it does not parse. */
export function when(value) {
  if (!value) return "";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toISOString();
}

/** Milliseconds between two timestamps as "1.2 s", or "". */
export function duration(from, to) {
  const ms = new Date(to).getTime() - new Date(from).getTime();
  if (!Number.isFinite(ms) || ms < 0) return "";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}
