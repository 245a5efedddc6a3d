// Calls to this Manager's own API (relative URLs: the CSP allows no other host anyway).
//
// The session lives in this module's memory only: a bearer token is never written to
// localStorage, sessionStorage, a cookie or the URL, so closing or reloading the tab forgets
// it. In multi-tenant mode the session holds one token per tenant (the API takes the tenant
// from the token, §12.5); the picked tenant's token is sent, with `X-Tenant-ID` naming it.

const session = { config: { authMode: "none", multiTenant: false, tenantClaim: "tenantId", traceUrlTemplate: null } };
const tokens = new Map(); // tenant label -> token
let current = null; // the picked tenant label

/** An answer other than 2xx: the HTTP status and the §2.2 body's code and message. */
export class ApiFailure extends Error {
  constructor(status, body, retryAfter) {
    const code = body && typeof body.code === "string" ? body.code : "";
    const message = body && typeof body.message === "string" ? body.message : "";
    super(`${status}${code ? ` ${code}` : ""}${message ? `: ${message}` : ""}`);
    this.status = status;
    this.code = code;
    this.title = body && typeof body.title === "string" ? body.title : "";
    this.detail = message;
    this.fields = body && typeof body.fields === "object" ? body.fields : null;
    this.retryAfter = retryAfter;
  }
}

export async function loadConfig() {
  const response = await fetch("/console/config.json", { credentials: "omit" });
  if (response.ok) session.config = await response.json();
  return session.config;
}

export function config() {
  return session.config;
}

/** The tenant a token names (its payload's tenant claim, read without verification: only a
 * label for the picker; the Manager verifies the token), or "" when it names none. */
export function tenantOf(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const payload = JSON.parse(atob(part.padEnd(Math.ceil(part.length / 4) * 4, "=")));
    const tenant = payload[session.config.tenantClaim];
    return typeof tenant === "string" ? tenant : "";
  } catch {
    return "";
  }
}

/** Keep `token` (memory only) and make its tenant the current one. */
export function addToken(token) {
  const label = session.config.multiTenant ? tenantOf(token) || `token ${tokens.size + 1}` : "";
  tokens.set(label, token.trim());
  current = label;
  return label;
}

export function forgetTokens() {
  tokens.clear();
  current = null;
}

export function tenants() {
  return [...tokens.keys()];
}

export function currentTenant() {
  return current;
}

export function pickTenant(label) {
  if (tokens.has(label)) current = label;
}

export function hasToken() {
  return current !== null && tokens.has(current);
}

function headers(extra) {
  const sent = { Accept: "application/json", ...extra };
  if (hasToken()) sent.Authorization = `Bearer ${tokens.get(current)}`;
  if (session.config.multiTenant && current) sent["X-Tenant-ID"] = current;
  return sent;
}

/** `GET` a binary path of this Manager (the encrypted result, §14.2) with the token; the
 * body as a Blob, or throws ApiFailure. */
export async function download(path) {
  const url = new URL(path, window.location.origin);
  if (url.origin !== window.location.origin) throw new Error("the console calls only its Manager");
  const response = await fetch(url, {
    headers: headers({ Accept: "application/octet-stream" }),
    credentials: "omit",
    cache: "no-store",
  });
  if (!response.ok) {
    const body = await response.json().catch(() => null);
    throw new ApiFailure(response.status, body, response.headers.get("Retry-After"));
  }
  return response.blob();
}

/** `GET`/`POST` a path of this Manager; the parsed JSON body, or throws ApiFailure. `header`
 * adds request headers (`X-Product-Name`). */
export async function request(path, { method = "GET", query, header } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
  }
  if (url.origin !== window.location.origin) throw new Error("the console calls only its Manager");
  const response = await fetch(url, {
    method,
    headers: headers(header),
    credentials: "omit",
    cache: "no-store",
  });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    throw new ApiFailure(response.status, body, response.headers.get("Retry-After"));
  }
  return body;
}
