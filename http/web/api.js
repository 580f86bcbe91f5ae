// The HTTP API: the bearer token's storage and a fetch wrapper that turns
// problem documents (RFC 9457) into errors fit to show.

import { sentence } from './dom.js';

export const KEY = 'herald.token';

// The token lives for the tab (sessionStorage) unless the person asked to
// be remembered (localStorage); never in both.
export function savedToken() {
  return sessionStorage.getItem(KEY) ?? localStorage.getItem(KEY);
}

export function saveToken(token, remember) {
  sessionStorage.removeItem(KEY);
  localStorage.removeItem(KEY);
  (remember ? localStorage : sessionStorage).setItem(KEY, token);
}

// forgetToken forgets token, and only token: another tab of this browser
// may have stored a newer one in localStorage since this tab read it, and
// signing this tab out must not sign that one out too.
export function forgetToken(token) {
  for (const store of [sessionStorage, localStorage]) {
    if (store.getItem(KEY) === token) store.removeItem(KEY);
  }
}

// waitFor reads Retry-After (RFC 9110: seconds, or an HTTP date) as whole
// seconds from now, or null when there is none or it cannot be read.
function waitFor(header) {
  if (!header) return null;
  if (/^\d+$/.test(header.trim())) return Number(header);
  const at = Date.parse(header);
  return Number.isNaN(at) ? null : Math.max(1, Math.ceil((at - Date.now()) / 1000));
}

// pleaseWait tells a person how long to wait, in the unit they would
// use: "5 minutes" rather than "300 seconds".
function pleaseWait(seconds) {
  if (seconds == null) return 'Please wait a moment, then try again.';
  const [n, unit] = seconds < 90 ? [seconds, 'second'] : [Math.ceil(seconds / 60), 'minute'];
  return `Please wait ${n} ${unit}${n === 1 ? '' : 's'}, then try again.`;
}

// What to say for a refusal that came without a problem document, from a
// proxy say: the status alone.
const fallback = {
  429: 'Too many requests.',
  502: 'The server cannot be reached.',
  503: 'The server is busy or down for maintenance.',
  504: 'The server took too long to answer.',
};

export class ApiError extends Error {
  constructor(status, problem, headers) {
    let msg = sentence(problem?.detail || problem?.title) || fallback[status] || `The request failed (status ${status}).`;
    // 429 and 503 mean "not now": say for how long, in place of the
    // detail's own vaguer "try again later".
    if (status === 429 || status === 503) {
      msg = msg.replace(/[;,]\s*try again[^.;]*\.$/i, '.') + ` ${pleaseWait(waitFor(headers?.get('Retry-After')))}`;
    }
    super(msg);
    this.status = status;
    this.retryAfter = waitFor(headers?.get('Retry-After')); // seconds, or null
    this.violations = problem?.violations ?? [];
    // RFC 6750: the server says invalid_token when the token itself is no
    // good, as opposed to a wrong password confirming a change.
    this.tokenRejected = status === 401 && /invalid_token/.test(headers?.get('WWW-Authenticate') ?? '');
  }
}

// Whether the server answered the last time anything asked it. A change
// is told to the page as an event on window, "herald:unreachable" or
// "herald:reachable", so it can say so and the live stream can stop
// waiting out its backoff once the server is back.
let reachable = true;
export function serverReached(yes) {
  if (yes === reachable) return;
  reachable = yes;
  dispatchEvent(new Event(yes ? 'herald:reachable' : 'herald:unreachable'));
}

// answered notes a response: a proxy's 502 or 504 is the server not
// answering too.
export const answered = (res) => serverReached(res.status !== 502 && res.status !== 504);

export const UNREACHABLE = 'The server cannot be reached. Check the connection and try again.';

// request sends one API call. body is sent as JSON unless contentType says
// otherwise; the answer is { data, etag }.
export async function request(method, path, { token, body, headers = {}, contentType = 'application/json' } = {}) {
  const h = { Accept: 'application/json', ...headers };
  if (token) h.Authorization = `Bearer ${token}`;
  if (body !== undefined) h['Content-Type'] = contentType;
  let res;
  try {
    res = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  } catch {
    serverReached(false);
    throw new ApiError(0, { detail: UNREACHABLE });
  }
  answered(res);
  if (res.ok) {
    const data = res.status === 204 ? null : await res.json();
    return { data, etag: res.headers.get('ETag') };
  }
  let problem = null;
  try {
    problem = await res.json();
  } catch {
    // not a problem document: the status alone must do
  }
  throw new ApiError(res.status, problem, res.headers);
}
