// Calls to the daemon's API with the operator's key. Every failure becomes
// an ApiError carrying the problem+json title and detail, so the page can
// show it instead of swallowing it.

const KEY = 'actiongate.key';

export const session = {
  get key() { return sessionStorage.getItem(KEY); },
  set key(v) {
    if (v) sessionStorage.setItem(KEY, v);
    else sessionStorage.removeItem(KEY);
  },
};

/** A failed API call (`retryAfter`: the seconds the daemon asked to wait,
 * when it said). */
export class ApiError extends Error {
  constructor(status, problem, retryAfter = null) {
    const title = problem?.title || `HTTP ${status}`;
    const detail = problem?.detail ? `: ${problem.detail}` : '';
    const fields = Array.isArray(problem?.errors) && problem.errors.length
      ? ` (${problem.errors.map((e) => `${e.field}: ${e.message}`).join('; ')})` : '';
    super(`${title}${detail}${fields}`);
    this.status = status;
    this.problem = problem;
    this.retryAfter = retryAfter;
  }
}

/** How long a call may take before it fails (the daemon answers within
 * seconds or says why; one that hangs must not swallow a decision). */
export const limits = { callMs: 20000 };

/** Calls the API; resolves to the parsed JSON body (or null). */
export async function api(method, path, body, key = session.key) {
  return (await call(method, path, body, key)).json;
}

/** The pauses before each resending of a decision (ms). */
export const decideRetry = { pausesMs: [500, 1500, 3000] };

/** Sends a decision (POST `path`), and sends it again after a 502, 503 or
 * 504 or a connection that failed (not one that timed out: that took a
 * whole call's time already), a few times: the daemon answers a decision
 * sent again by the one who made it as the item stands, so an approval
 * made whose answer was lost is not shown as an error. */
export async function decide(path, body, key = session.key) {
  for (let attempt = 0; ; attempt++) {
    try {
      return (await call('POST', path, body, key)).json;
    } catch (e) {
      const lost = e instanceof ApiError && (e.status === 0 ? !e.late : [502, 503, 504].includes(e.status));
      if (!lost || attempt >= decideRetry.pausesMs.length) throw e;
      const asked = Math.min(Number(e.retryAfter) || 0, 5) * 1000;
      await new Promise((r) => setTimeout(r, Math.max(asked, decideRetry.pausesMs[attempt])));
    }
  }
}

/** A page of a listing paged by `after`: `{ items, next }`, where `next`
 * says the daemon cut the page short for its size and links the next one
 * (`Link: <…>; rel="next"`), so a short page is not the last. */
export async function apiPage(path, key = session.key) {
  const { json, resp } = await call('GET', path, undefined, key);
  const link = resp.headers.get('link') || '';
  return { items: Array.isArray(json) ? json : [], next: /;\s*rel="next"/.test(link) };
}

async function call(method, path, body, key) {
  // Decisions record the channel they came through.
  const headers = { accept: 'application/json', 'x-actiongate-channel': 'page' };
  if (key) headers.authorization = `Bearer ${key}`;
  const init = { method, headers, cache: 'no-store', signal: AbortSignal.timeout(limits.callMs) };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  let text;
  try {
    resp = await fetch(path, init);
    text = await resp.text();
  } catch (e) {
    const late = e?.name === 'TimeoutError' || e?.name === 'AbortError';
    const err = new ApiError(0, late
      ? { title: 'The daemon did not answer', detail: `no answer within ${limits.callMs / 1000} s: it may or may not have been done; look before trying again` }
      : { title: 'The daemon could not be reached', detail: String(e.message || e) });
    err.late = late;
    throw err;
  }
  let json = null;
  if (text) {
    try { json = JSON.parse(text); } catch { json = null; }
  }
  if (!resp.ok) {
    throw new ApiError(resp.status, json || { title: `HTTP ${resp.status}`, detail: text.slice(0, 200) }, resp.headers.get('retry-after'));
  }
  return { json, resp };
}

export const enc = encodeURIComponent;
