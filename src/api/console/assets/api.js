// The REST API from the browser. The token lives in sessionStorage: it survives a reload but
// not the browser session, and `Sign out` removes it. So does the namespace the console shows.

const TOKEN_KEY = 'jobflow.token';
const NAMESPACE_KEY = 'jobflow.namespace';
const SEEN_KEY = 'jobflow.namespaces';

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

export const DEFAULT_NAMESPACE = 'default';

/// 1-40 of `a-z 0-9 -`, starting and ending with a letter or digit (as the API checks it).
export const NAMESPACE_PATTERN = '[a-z0-9]([a-z0-9\\-]{0,38}[a-z0-9])?';
const NAMESPACE_RE = new RegExp(`^${NAMESPACE_PATTERN}$`);
export const isNamespace = (value) => NAMESPACE_RE.test(value);

/// The namespace whose jobs and executions the console shows, and those chosen before in this
/// browser session (offered again by the selector).
export const namespace = {
  get: () => sessionStorage.getItem(NAMESPACE_KEY) || DEFAULT_NAMESPACE,
  set(value) {
    sessionStorage.setItem(NAMESPACE_KEY, value);
    const seen = this.seen();
    if (!seen.includes(value)) sessionStorage.setItem(SEEN_KEY, JSON.stringify([...seen, value].slice(-20)));
  },
  seen() {
    try {
      const list = JSON.parse(sessionStorage.getItem(SEEN_KEY) || '[]');
      return Array.isArray(list) ? list.filter(isNamespace) : [];
    } catch {
      return [];
    }
  },
  clear() {
    sessionStorage.removeItem(NAMESPACE_KEY);
    sessionStorage.removeItem(SEEN_KEY);
  },
};

/// `path` in the chosen namespace: every job and execution route takes `namespace=` (absent
/// means `default`, which a token restricted to other namespaces may not see).
export function inNamespace(path) {
  return `${path}${path.includes('?') ? '&' : '?'}namespace=${encodeURIComponent(namespace.get())}`;
}

/// `api` for the job and execution routes: in the chosen namespace.
export function nsApi(method, path, body) {
  return api(method, inNamespace(path), body);
}

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
