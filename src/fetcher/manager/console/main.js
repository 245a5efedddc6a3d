// The console's entry point: the session bar (token and tenant picker with AUTH_MODE=jwt) and
// the hash router (`#/jobs`, `#/jobs/<id>`, `#/connections`, `#/connections/<id>`, `#/events`).

import {
  addToken, config, currentTenant, forgetTokens, hasToken, loadConfig, pickTenant, tenants,
} from "./api.js";
import { connectionView, connectionsView } from "./connections.js";
import { h, replace } from "./dom.js";
import { eventsView } from "./events.js";
import { jobView, jobsView } from "./jobs.js";
import { newLifetime } from "./view.js";

const ROUTES = [
  [/^\/jobs\/([^/]+)$/, (root, match, params, life) => jobView(root, decodeURIComponent(match[1]), life)],
  [/^\/jobs$/, (root, match, params, life) => jobsView(root, params, life)],
  [/^\/connections\/([^/]+)$/, (root, match) => connectionView(root, decodeURIComponent(match[1]))],
  [/^\/connections$/, (root, match, params) => connectionsView(root, params)],
  [/^\/events$/, (root, match, params, life) => eventsView(root, params, life)],
];

function route() {
  const root = document.getElementById("view");
  const life = newLifetime();
  const [path, query] = (window.location.hash.slice(1) || "/jobs").split("?");
  const params = new URLSearchParams(query || "");
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.classList.toggle("active", path.startsWith(`/${link.dataset.nav}`));
  }
  if (config().authMode === "jwt" && !hasToken()) {
    replace(root, h("p", { class: "muted" }, "Enter a bearer token above to see jobs, connections and events."));
    return;
  }
  for (const [pattern, render] of ROUTES) {
    const match = pattern.exec(path);
    if (match) {
      render(root, match, params, life);
      return;
    }
  }
  replace(root, h("p", {}, "No such page. ", h("a", { href: "#/jobs" }, "Jobs")));
}

function tokenForm() {
  const input = h("input", {
    type: "password", id: "token", autocomplete: "off", spellcheck: "false", placeholder: "bearer token",
  });
  const use = h("button", { type: "button", id: "use-token" }, config().multiTenant ? "Add token" : "Use token");
  use.addEventListener("click", () => {
    if (!input.value.trim()) return;
    addToken(input.value);
    input.value = "";
    renderSession();
    route();
  });
  return [h("label", { for: "token" }, "Bearer token "), input, use];
}

function tenantPicker() {
  const select = h("select", { id: "tenant", title: "tenant (X-Tenant-ID)" },
    tenants().map((t) => h("option", { value: t, selected: t === currentTenant() }, t)));
  select.addEventListener("change", () => {
    pickTenant(select.value);
    route();
  });
  return h("label", {}, "Tenant ", select);
}

function renderSession() {
  const bar = document.getElementById("session");
  if (config().authMode !== "jwt") {
    replace(bar, h("span", { class: "muted" }, "no authentication (AUTH_MODE=none)"));
    return;
  }
  const forget = h("button", { type: "button", id: "forget-token" }, "Forget");
  forget.addEventListener("click", () => {
    forgetTokens();
    renderSession();
    route();
  });
  replace(
    bar,
    config().multiTenant && tenants().length ? tenantPicker() : null,
    hasToken() && !config().multiTenant ? h("span", { class: "muted" }, "token in memory ") : null,
    !hasToken() || config().multiTenant ? tokenForm() : null,
    hasToken() ? forget : null,
  );
}

async function start() {
  await loadConfig();
  renderSession();
  window.addEventListener("hashchange", route);
  route();
}

start();
