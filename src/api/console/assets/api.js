// The REST API from the browser. The token lives in sessionStorage: it survives a reload but
// not the browser session, and `Sign out` removes it.

const TOKEN_KEY = 'jobflow.token';

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/// A problem+json answer: `status`, `detail`, and the rejected fields by name.
export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.fields = {};
    for (const e of (problem && problem.errors) || []) {
      this.fields[e.field] = this.fields[e.field] ? `${this.fields[e.field]}; ${e.message}` : e.message;
    }
  }
}

/// Called with the ApiError when the API answers 401 (the token is gone or was revoked).
let onUnauthorized = () => {};
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

/// As `api`, with the `rel="related"` link of the answer's `Link` header (or null).
export async function apiWithLink(method, path) {
  let link = null;
  const json = await api(method, path, undefined, (resp) => {
    const m = /<([^>]+)>\s*;\s*rel="related"/.exec(resp.headers.get('Link') || '');
    link = m ? m[1] : null;
  });
  return { json, link };
}

export async function api(method, path, body, onResponse) {
  const headers = { Accept: 'application/json' };
  const t = token.get();
  if (t) headers.Authorization = `Bearer ${t}`;
  const init = { method, headers };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(`/api/v1${path}`, init);
  if (onResponse) onResponse(resp);
  const text = await resp.text();
  let json = null;
  if (text) {
    try {
      json = JSON.parse(text);
    } catch {
      json = { detail: text.slice(0, 300) };
    }
  }
  if (!resp.ok) {
    const err = new ApiError(resp.status, json);
    if (resp.status === 401) onUnauthorized(err);
    throw err;
  }
  return json;
}

/// `?a=1&b=2` from an object, leaving out empty values.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, v);
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

export const enc = encodeURIComponent;
