/**
 * The client: one daemon, one key. Every call takes an `AbortSignal`;
 * dropped connections and 502/503/504 are retried only where repeating is
 * safe (reads, checks, and new actions, which always carry one idempotency
 * key); long waits are split into long-polls. Nothing resolves as allowed
 * on an error: errors are thrown as the classes of `errors.ts`.
 */
import type { ReceiptClaims } from './receipts.js';
import { Aborted, ActionGateError, ApiError, Denied, Expired, TimedOut, Unreachable } from './errors.js';
import type { FieldError } from './errors.js';
import { denialReason, isApproved, isSettled, wasApproved } from './models.js';
import type { Action, CheckResult, Event, Grant, GrantRequest, Plan, PlanStepRequest, WhoAmI } from './models.js';
import type { components } from './openapi.js';
import { Backoff, SseParser, toEvent } from './sse.js';
import { compactJson } from './adapters.js';

type Schemas = components['schemas'];

export const VERSION = '0.1.0';
const DEFAULT_URL = 'http://127.0.0.1:8080';
/** Longest single long-poll the daemon accepts by default; longer waits are split. */
const MAX_POLL_SECONDS = 60;
/** Pauses between attempts of a retried call, in milliseconds. */
const RETRY_DELAYS = [250, 500, 1000, 2000, 4000];
const RETRY_STATUSES = new Set([502, 503, 504]);

/** A duration for the API: `"5m"`, `"90s"`, or seconds. */
export type Duration = string | number;

/** Options every call takes. */
export interface CallOptions {
  signal?: AbortSignal;
}

export interface ClientOptions {
  /** The daemon's URL (default `ACTIONGATE_URL`, else `http://127.0.0.1:8080`). */
  url?: string;
  /** The API key (default `ACTIONGATE_KEY`). */
  key?: string;
  /** Bounds each call in seconds, retries included; a call that waits (`wait`) gets its wait on top. Default 30. */
  timeout?: number;
  /** The `fetch` to use (default the platform's). */
  fetch?: typeof fetch;
}

export interface RequestOptions extends CallOptions {
  /** Shown to the human. */
  reason?: string;
  /** How long a human has to decide (`"5m"` or seconds). */
  timeout?: Duration;
  /** How many seconds to wait for the settled answer (0: do not wait). */
  wait?: number;
  /** Sent on every attempt; one is made up when not given. */
  idempotencyKey?: string;
  /** The agent runtime's task or run this action belongs to. */
  session?: string;
  /**
   * A decision-only action's params: the tool call's input (a file write's
   * content, an edit's old and new text), shown to the humans who decide.
   * The policy reads only the tool and detail.
   */
  params?: Record<string, unknown>;
  /**
   * A decision-only action's caution (1-500 printable characters): why the
   * caller cannot vouch that the call does only what its tool and detail
   * say. An allow by any rule or grant then asks a human, and only an
   * operator's approval of it allows it.
   */
  caution?: string;
}

/**
 * The grant an approval also makes (the API's `Remember`): until `expires`;
 * `session` limits it to one task, `uses` to the next N allowed actions.
 */
export type RememberOptions = Omit<Schemas['Remember'], 'scope'> & {
  /** Handler actions: the scope granted (default the action's); values may be globs. */
  scope?: Record<string, unknown> | null;
};

/**
 * An operator's approval (the API's `ApproveBody`). `detail` (a
 * decision-only action) or `params` (a handler action) edit the action
 * first; an edit and `remember` do not go together.
 */
export interface ApproveOptions extends CallOptions, Pick<Schemas['ApproveBody'], 'note' | 'detail'> {
  /** Also grant: an expiry like `"1h"`, or its fields. */
  remember?: string | RememberOptions;
  /** The version read: `asked` (the default) or `edited` by another approver. */
  seen?: Schemas['Seen'];
  /** Handler actions: the params to run instead of those asked. */
  params?: Record<string, unknown>;
}

export interface GrantOptions extends CallOptions {
  handler?: string;
  permission?: string;
  scope?: Record<string, unknown>;
  tool?: string;
  pattern?: string;
  /** `1h`, `today`, `indefinite`, RFC 3339. Default `1h`. */
  expires?: string;
  agent?: string;
  note?: string;
  /** Only within this session (the task's); void once it ends. */
  session?: Schemas['ToolGrant']['session'];
  /** Void after this many allowed actions (1-10000). */
  uses?: Schemas['ToolGrant']['uses'];
  /** Makes a retry safe (one is made up when not given): the same key and grant answer the grant made the first time. */
  idempotencyKey?: string;
}

export interface PermissionOptions extends CallOptions {
  /** 1 to 60 (default 15). */
  timeoutMinutes?: number;
  handler?: string;
  scope?: Record<string, unknown>;
  expires?: string;
}

export interface PlanOptions extends CallOptions {
  /** The session the steps will run in (required). */
  session: string;
  /** Why (shown to the human). */
  reason?: string;
  /** The runtime sending it, a short slug. */
  runtime?: string;
  /** Seconds to wait for the decision (default 300). */
  timeout?: number;
  /** Makes a retry safe (one is made up when not given): the same key and plan answer the plan asked first, asking no human twice. */
  idempotencyKey?: string;
}

export interface EventsOptions extends CallOptions {
  /** The seq to resume after. */
  since?: number | string;
  /** A filter such as `"action.*,grant.created"`. */
  types?: string;
}

interface Call {
  method: string;
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  retry?: boolean;
  /** Seconds the daemon may hold the request (long-poll). */
  wait?: number;
  /**
   * When the whole call ends (`Date.now()` ms), retries and pauses
   * included; default the client's timeout plus `wait` from now.
   */
  deadline?: number;
  signal?: AbortSignal;
  /** Told the headers of the answer that is returned (for `Link`). */
  onHeaders?: (headers: Headers) => void;
}

function env(name: string): string | undefined {
  const g = globalThis as { process?: { env?: Record<string, string | undefined> }; Deno?: { env?: { get(n: string): string | undefined } } };
  try {
    return g.process?.env?.[name] ?? g.Deno?.env?.get(name);
  } catch {
    return undefined;
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new Aborted('aborted'));
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(new Aborted('aborted'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function duration(value: Duration | undefined, name: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value;
  if (!Number.isFinite(value) || value <= 0) {
    throw new RangeError(`${name} must be a positive number of seconds or a string like '5m'`);
  }
  return `${Math.ceil(value)}s`;
}

function pollSeconds(remainingMs: number): number {
  return Math.max(0, Math.min(MAX_POLL_SECONDS, Math.ceil(remainingMs / 1000)));
}

/** Whether two JSON values are equal, whatever the order of their keys. */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((v, i) => sameJson(v, b[i]));
  }
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const keys = Object.keys(x);
  return keys.length === Object.keys(y).length && keys.every((k) => Object.hasOwn(y, k) && sameJson(x[k], y[k]));
}

function randomKey(): string {
  const c = globalThis.crypto;
  if (c?.randomUUID) return c.randomUUID().replaceAll('-', '');
  const bytes = new Uint8Array(16);
  c.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

async function problem(response: Response): Promise<ApiError> {
  const text = await response.text().catch(() => '');
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (body && typeof body === 'object' && ('title' in body || 'code' in body)) {
    const b = body as Record<string, unknown>;
    let code = b['code'];
    if (typeof code !== 'string') {
      const kind = b['type'];
      code = typeof kind === 'string' ? kind.slice(kind.lastIndexOf(':') + 1) : `http_${response.status}`;
    }
    const errors: FieldError[] = Array.isArray(b['errors'])
      ? (b['errors'] as unknown[])
          .filter((e): e is Record<string, unknown> => !!e && typeof e === 'object')
          .map((e) => ({ field: String(e['field'] ?? ''), message: String(e['message'] ?? '') }))
      : [];
    return new ApiError({
      status: response.status,
      code: code as string,
      title: String(b['title'] ?? response.statusText),
      detail: String(b['detail'] ?? ''),
      errors,
      problem: b,
    });
  }
  return new ApiError({
    status: response.status,
    code: `http_${response.status}`,
    title: response.statusText || 'HTTP error',
    detail: text.slice(0, 200),
  });
}

function object<T>(value: unknown): T {
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new ApiError({ status: 200, code: 'bad_response', title: 'Unexpected answer', detail: 'expected an object' });
  }
  return value as T;
}

/**
 * The answer about what the client named by id (an action, a plan, a grant
 * request), refused unless it is that one, with the tool and detail known
 * of it: a wrong answer (a buggy proxy, a cache) must never pass another
 * action's approval off as this one's.
 */
function same<T extends { id: string }>(asked: { id: string; tool?: string; detail?: string }, value: unknown): T {
  const got = object<T & { tool?: unknown; detail?: unknown }>(value);
  for (const k of ['id', 'tool', 'detail'] as const) {
    if (asked[k] !== undefined && got[k] !== asked[k]) {
      throw new ApiError({ status: 200, code: 'bad_response', title: 'Unexpected answer', detail: `asked about ${asked.id}; the answer is about another one (its ${k} differs)` });
    }
  }
  return got;
}

/** A client for one daemon and one key. */
export class Client {
  readonly url: string;
  private readonly key: string;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions = {}) {
    const url = options.url ?? env('ACTIONGATE_URL') ?? DEFAULT_URL;
    const key = options.key ?? env('ACTIONGATE_KEY');
    if (!key) throw new ActionGateError('no API key: pass key or set ACTIONGATE_KEY');
    if (!/^https?:\/\//.test(url)) throw new ActionGateError(`bad url ${JSON.stringify(url)}: it must start with http:// or https://`);
    const timeout = options.timeout ?? 30;
    if (!(timeout > 0)) throw new RangeError('timeout must be positive');
    this.url = url.replace(/\/+$/, '');
    this.key = key;
    this.timeoutMs = timeout * 1000;
    const f = options.fetch ?? globalThis.fetch;
    if (!f) throw new ActionGateError('no fetch: this platform has none; pass options.fetch');
    this.fetchImpl = f.bind(globalThis);
  }

  // ------------------------------------------------------------ transport

  private headers(extra?: Record<string, string>): Record<string, string> {
    return {
      authorization: `Bearer ${this.key}`,
      accept: 'application/json',
      'user-agent': `actiongate-typescript/${VERSION}`,
      ...extra,
    };
  }

  private target(path: string, query?: Record<string, string | number | undefined>): string {
    const u = new URL(this.url + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    return u.toString();
  }

  /** The deadline of a call that may wait `waitMs` for the daemon: the wait plus the client's timeout. */
  private deadline(waitMs: number): number {
    return Date.now() + Math.max(0, waitMs) + this.timeoutMs;
  }

  /** A failed exchange as the client's error: {@link Aborted} or {@link Unreachable}, with the cause. */
  private failure(e: unknown, call: Call, ms: number, reading: boolean): ActionGateError {
    if (call.signal?.aborted) return new Aborted('aborted', { cause: e });
    let why = (e as Error)?.name === 'TimeoutError' ? `no answer within ${+(ms / 1000).toFixed(1)} s` : ((e as Error)?.message ?? String(e));
    if (reading) why = `the answer was cut off: ${why}`;
    return new Unreachable(`${this.url}: ${why}`, { cause: e });
  }

  /** One exchange, bounded by `signal` (the attempt's time and the caller's signal). */
  private async once(call: Call, signal: AbortSignal): Promise<Response> {
    const init: RequestInit = { method: call.method, headers: this.headers(), signal, redirect: 'manual' };
    if (call.body !== undefined) {
      init.body = JSON.stringify(call.body);
      (init.headers as Record<string, string>)['content-type'] = 'application/json';
    }
    return this.fetchImpl(this.target(call.path, call.query), init);
  }

  private async send<T>(call: Call): Promise<T> {
    // The whole call ends by its deadline, retries and their pauses
    // included: a daemon that hangs costs the caller what they asked for
    // (the wait plus the timeout), not that once per attempt.
    const deadline = call.deadline ?? this.deadline((call.wait ?? 0) * 1000);
    const attempts = call.retry ? RETRY_DELAYS.length + 1 : 1;
    let last: ActionGateError | undefined;
    for (let attempt = 0; attempt < attempts; attempt++) {
      if (attempt > 0) {
        const pause = RETRY_DELAYS[attempt - 1] ?? 4000;
        if (Date.now() + pause >= deadline) break;
        await sleep(pause, call.signal);
      }
      const ms = Math.min(this.timeoutMs + (call.wait ?? 0) * 1000, deadline - Date.now());
      if (ms <= 0) break;
      const bound = AbortSignal.timeout(ms);
      const signal = call.signal ? AbortSignal.any([call.signal, bound]) : bound;
      let response: Response;
      let text: string;
      let reading = false;
      try {
        response = await this.once(call, signal);
        if (response.status >= 400) {
          const err = await problem(response);
          if (call.retry && RETRY_STATUSES.has(response.status) && attempt + 1 < attempts) {
            last = err;
            const after = Number(response.headers.get('retry-after'));
            if (Number.isFinite(after) && after > 0) {
              const pause = Math.min(after, 10) * 1000;
              if (Date.now() + pause >= deadline) break;
              await sleep(pause, call.signal);
            }
            continue;
          }
          throw err;
        }
        if (response.status >= 300) {
          throw new ApiError({ status: response.status, code: 'redirect', title: 'Redirected', detail: 'the daemon answered with a redirect (is the URL right?)' });
        }
        // Read inside the try: a connection cut after the headers fails
        // here, and is the client's error like one cut before them.
        reading = true;
        text = await response.text();
        call.onHeaders?.(response.headers);
      } catch (e) {
        if (e instanceof ActionGateError) throw e;
        const err = this.failure(e, call, ms, reading);
        if (err instanceof Unreachable && call.retry) {
          last = err;
          continue;
        }
        throw err;
      }
      if (response.status === 204 || !text) return undefined as T;
      try {
        return JSON.parse(text) as T;
      } catch {
        throw new ApiError({ status: response.status, code: 'bad_response', title: 'Not JSON', detail: "the daemon's answer was not JSON (is the URL right?)" });
      }
    }
    throw last ?? new Unreachable(`${this.url}: no answer within the call's time`);
  }

  // --------------------------------------------------------------- agents

  /** What the policy would answer now (nothing is stored). */
  async check(tool: string, detail: string, options: CallOptions & { session?: string } = {}): Promise<CheckResult> {
    const body: Record<string, unknown> = { tool, detail };
    if (options.session !== undefined) body['session'] = options.session;
    return object<CheckResult>(await this.send({ method: 'POST', path: '/v1/check', body, retry: true, signal: options.signal }));
  }

  /**
   * Asks to do something (a decision-only action) and resolves to the
   * action, waiting up to `wait` seconds for it to settle. It may still be
   * `pending` when the wait runs out: read `status`.
   */
  async request(tool: string, detail: string, options: RequestOptions = {}): Promise<Action> {
    const body: Record<string, unknown> = { tool, detail };
    if (options.params !== undefined) body['params'] = options.params;
    if (options.caution !== undefined) body['caution'] = options.caution;
    return this.newAction(body, options);
  }

  /** Asks for a handler action (run by its executor once allowed). */
  async run(handler: string, action: string, params: Record<string, unknown>, options: RequestOptions = {}): Promise<Action> {
    return this.newAction({ handler, action, params }, options);
  }

  private async newAction(body: Record<string, unknown>, options: RequestOptions): Promise<Action> {
    if (options.reason !== undefined) body['reason'] = options.reason;
    const t = duration(options.timeout, 'timeout');
    if (t !== undefined) body['timeout'] = t;
    if (options.session !== undefined) body['session'] = options.session;
    // One idempotency key for every attempt: a retry after a dropped
    // connection gets the action the first attempt made, never a second.
    body['idempotency_key'] = options.idempotencyKey ?? randomKey();
    const waitMs = Math.max(0, (options.wait ?? 0) * 1000);
    const waitEnds = Date.now() + waitMs;
    const deadline = this.deadline(waitMs);
    const first = pollSeconds(waitMs);
    const action = object<Action>(
      await this.send({
        method: 'POST',
        path: '/v1/actions',
        query: { wait: first || undefined },
        body,
        retry: true,
        wait: first,
        deadline,
        signal: options.signal,
      }),
    );
    return waitMs > 0 ? this.pollUntil(action, waitEnds, deadline, options.signal) : action;
  }

  /** Long-polls the action until it is settled or `waitEnds`; the whole call ends by `deadline`. */
  private async pollUntil(action: Action, waitEnds: number, deadline: number, signal?: AbortSignal): Promise<Action> {
    while (!isSettled(action)) {
      const remaining = waitEnds - Date.now();
      if (remaining <= 0) break;
      const w = pollSeconds(remaining);
      action = same<Action>(
        action,
        await this.send({ method: 'GET', path: `/v1/actions/${encodeURIComponent(action.id)}`, query: { wait: w }, retry: true, wait: w, deadline, signal }),
      );
    }
    return action;
  }

  /**
   * Reports what actually ran (as a post-tool hook saw it): `true` when an
   * allow or approval covered it. A run nothing covered raises the
   * `action.undecided` event for the operators.
   */
  async reportRun(tool: string, detail: string, options: CallOptions & { session?: string; runtime?: string; action?: string } = {}): Promise<boolean> {
    const body: Record<string, unknown> = { tool, detail };
    for (const k of ['session', 'runtime', 'action'] as const) if (options[k] !== undefined) body[k] = options[k];
    const answer = object<{ decided: boolean }>(await this.send({ method: 'POST', path: '/v1/runs', body, signal: options.signal }));
    return answer.decided === true;
  }

  /** The action as it stands. */
  async get(id: string, options: CallOptions = {}): Promise<Action> {
    return same<Action>({ id }, await this.send({ method: 'GET', path: `/v1/actions/${encodeURIComponent(id)}`, retry: true, signal: options.signal }));
  }

  /** Waits until the action is settled; {@link TimedOut} if it is not within `timeout` seconds. */
  async wait(id: string, timeout: number, options: CallOptions = {}): Promise<Action> {
    if (!(timeout >= 0)) throw new RangeError('timeout must be a non-negative number of seconds');
    const waitEnds = Date.now() + timeout * 1000;
    const deadline = this.deadline(timeout * 1000);
    const w = pollSeconds(timeout * 1000);
    let action = same<Action>(
      { id },
      await this.send({ method: 'GET', path: `/v1/actions/${encodeURIComponent(id)}`, query: { wait: w || undefined }, retry: true, wait: w, deadline, signal: options.signal }),
    );
    action = await this.pollUntil(action, waitEnds, deadline, options.signal);
    if (!isSettled(action)) throw new TimedOut(`action ${id} still ${action.status} after ${timeout} s`, action);
    return action;
  }

  /** Withdraws a pending action (sent again after a 503 or a drop: the daemon answers a cancel it made as it stands). */
  async cancel(id: string, options: CallOptions = {}): Promise<Action> {
    return same<Action>({ id }, await this.send({ method: 'POST', path: `/v1/actions/${encodeURIComponent(id)}/cancel`, retry: true, signal: options.signal }));
  }

  /** Reports how an approved decision-only action went (`completed` or `failed`). */
  async report(id: string, status: 'completed' | 'failed', options: CallOptions & { result?: unknown; error?: string } = {}): Promise<Action> {
    const body: Record<string, unknown> = { status };
    if (options.result !== undefined) body['result'] = options.result;
    if (options.error !== undefined) body['error'] = options.error;
    // The same report sent again is answered as the action stands.
    return same<Action>({ id }, await this.send({ method: 'POST', path: `/v1/actions/${encodeURIComponent(id)}/outcome`, body, retry: true, signal: options.signal }));
  }

  /**
   * Asks a human for a permission and waits. Without `handler` it is the
   * item the MCP tool makes (a pending action `tool:permission:<name>`);
   * with `handler` a grant request for that handler's permission, granted
   * on approval. True only when approved as asked (an approval of an
   * edited permission is false).
   */
  async requestPermission(permission: string, reason: string, options: PermissionOptions = {}): Promise<boolean> {
    const minutes = options.timeoutMinutes ?? 15;
    if (!Number.isInteger(minutes) || minutes < 1 || minutes > 60) throw new RangeError('timeoutMinutes must be an integer from 1 to 60');
    if (!permission || !reason) throw new RangeError('permission and reason must not be empty');
    const waitSeconds = minutes * 60 + 5;
    if (options.handler === undefined) {
      const action = await this.newAction(
        { tool: 'permission', detail: permission },
        { reason, timeout: `${minutes}m`, wait: waitSeconds, signal: options.signal },
      );
      // Granted as an approver edited it is not what was asked.
      return (action.status === 'approved' || action.status === 'completed') && action.edited !== true;
    }
    const body: Record<string, unknown> = { handler: options.handler, permission, reason, timeout: `${minutes}m` };
    if (options.scope !== undefined) body['scope'] = options.scope;
    if (options.expires !== undefined) body['expires'] = options.expires;
    // One key for every attempt: a retry after a 503 or a dropped
    // connection answers the request the first attempt made, never a second.
    body['idempotency_key'] = randomKey();
    const waitEnds = Date.now() + waitSeconds * 1000;
    const deadline = this.deadline(waitSeconds * 1000);
    let w = pollSeconds(waitEnds - Date.now());
    let req = object<GrantRequest>(
      await this.send({ method: 'POST', path: '/v1/grant-requests', query: { wait: w }, body, retry: true, wait: w, deadline, signal: options.signal }),
    );
    while (req.status === 'pending') {
      const remaining = waitEnds - Date.now();
      if (remaining <= 0) break;
      w = pollSeconds(remaining);
      req = same<GrantRequest>(
        req,
        await this.send({ method: 'GET', path: `/v1/grant-requests/${encodeURIComponent(req.id)}`, query: { wait: w }, retry: true, wait: w, deadline, signal: options.signal }),
      );
    }
    // Granted with another scope than asked (an approver narrowed it) is
    // not what was asked either: the agent would plan on what it lacks.
    return req.status === 'approved' && req.grant != null && sameJson(req.scope, req.grant.scope ?? {});
  }

  /**
   * Asks a human to approve a task's steps at once (`{tool, detail}` or
   * `{handler, action, params}` each) and waits up to `timeout` seconds for
   * the decision. Once approved, each step of `approvedSteps(plan)` runs
   * once in `session` without another question; those of
   * `askingSteps(plan)` still ask when they run. A plan nobody decided in
   * time comes back `pending`: follow it with {@link plan}.
   */
  async requestPlan(steps: PlanStepRequest[], options: PlanOptions): Promise<Plan> {
    if (!options.session) throw new RangeError('session must not be empty');
    if (!steps.length) throw new RangeError('a plan has at least one step');
    const timeout = options.timeout ?? 300;
    if (!(timeout >= 0)) throw new RangeError('timeout must be a non-negative number of seconds');
    const body: Record<string, unknown> = { session: options.session, steps };
    if (options.reason !== undefined) body['reason'] = options.reason;
    if (options.runtime !== undefined) body['runtime'] = options.runtime;
    // One key for every attempt: a retry after a 503 or a dropped
    // connection answers the plan the first attempt made, never a second.
    body['idempotency_key'] = options.idempotencyKey ?? randomKey();
    const waitEnds = Date.now() + timeout * 1000;
    const deadline = this.deadline(timeout * 1000);
    const plan = object<Plan>(await this.send({ method: 'POST', path: '/v1/plans', body, retry: true, deadline, signal: options.signal }));
    return this.pollPlan(plan, waitEnds, deadline, options.signal);
  }

  /** The plan, waiting up to `wait` seconds (default 0) for its decision. */
  async plan(id: string, options: CallOptions & { wait?: number } = {}): Promise<Plan> {
    const waitMs = (options.wait ?? 0) * 1000;
    const waitEnds = Date.now() + waitMs;
    const deadline = this.deadline(waitMs);
    const plan = same<Plan>({ id }, await this.send({ method: 'GET', path: `/v1/plans/${encodeURIComponent(id)}`, retry: true, deadline, signal: options.signal }));
    return this.pollPlan(plan, waitEnds, deadline, options.signal);
  }

  private async pollPlan(plan: Plan, waitEnds: number, deadline: number, signal?: AbortSignal): Promise<Plan> {
    while (plan.status === 'pending') {
      const remaining = waitEnds - Date.now();
      if (remaining <= 0) break;
      const w = pollSeconds(remaining);
      plan = same<Plan>(
        plan,
        await this.send({ method: 'GET', path: `/v1/plans/${encodeURIComponent(plan.id)}`, query: { wait: w }, retry: true, wait: w, deadline, signal }),
      );
    }
    return plan;
  }

  /**
   * Follows `GET /v1/events` for ever, as an async iterator. A dropped
   * stream (or a 5xx, or a 429 while the key holds its most streams) is
   * reconnected with backoff and resumed with `Last-Event-ID` (before any
   * event arrived, from where the stream started), so no event is missed
   * or repeated. A refused key (4xx) throws {@link ApiError}; the signal
   * ends it.
   */
  async *events(options: EventsOptions = {}): AsyncGenerator<Event> {
    let last = options.since === undefined ? undefined : String(options.since);
    const backoff = new Backoff();
    const signal = options.signal;
    while (!signal?.aborted) {
      const headers = this.headers({ accept: 'text/event-stream' });
      if (last !== undefined) headers['last-event-id'] = last;
      let response: Response | undefined;
      try {
        response = await this.fetchImpl(this.target('/v1/events', { types: options.types }), {
          headers,
          signal,
          redirect: 'manual',
        });
      } catch {
        response = undefined;
      }
      if (response && response.status >= 400) {
        const err = await problem(response);
        // 429: the key holds as many streams as it may; one may close.
        if (response.status < 500 && response.status !== 429) throw err;
      } else if (response?.body) {
        // Where this stream starts: a drop before any event resumes there,
        // not from the newest event at the next connection.
        const resume = response.headers.get('actiongate-resume-after');
        if (resume !== null && /^\d+$/.test(resume)) last = resume;
        const parser = new SseParser();
        const decoder = new TextDecoder();
        const reader = response.body.getReader();
        try {
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            for (const msg of parser.feed(decoder.decode(value, { stream: true }))) {
              backoff.reset();
              const event = toEvent(msg);
              if (!event) continue;
              if (event.seq !== null) last = String(event.seq);
              yield event;
            }
          }
        } catch {
          // Dropped: reconnect below (or stop, if aborted).
        } finally {
          reader.cancel().catch(() => {});
        }
      }
      if (signal?.aborted) break;
      try {
        await sleep(backoff.next(), signal);
      } catch {
        break;
      }
    }
  }

  // ------------------------------------------------------------ operators

  /** Every pending action, oldest first (operator key). */
  async pending(options: CallOptions = {}): Promise<Action[]> {
    const items: Action[] = [];
    let cursor: string | undefined;
    do {
      const page = object<{ items?: Action[]; next_cursor?: string | null }>(
        await this.send({ method: 'GET', path: '/v1/actions', query: { status: 'pending', limit: 200, cursor }, retry: true, signal: options.signal }),
      );
      items.push(...(page.items ?? []));
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    return items.reverse();
  }

  /**
   * Approves a pending action; `remember` also grants (an expiry like `"1h"`, or its fields).
   * `detail` (decision-only) or `params` (handler actions) edit it first. `seen` names the
   * version read (`asked`, the default, or `edited` by another approver): the approval is
   * refused (409) when the action is otherwise by then, so approving an edit takes
   * `seen: 'edited'`.
   */
  async approve(id: string, options: ApproveOptions = {}): Promise<Action> {
    const body: Record<string, unknown> = {};
    for (const k of ['note', 'seen', 'detail', 'params'] as const) if (options[k] !== undefined) body[k] = options[k];
    if (options.remember !== undefined) body['remember'] = typeof options.remember === 'string' ? { expires: options.remember } : options.remember;
    // A plain approval sent again is answered as it stands (the daemon
    // recognises its own decider's): safe to retry after a 503 or a drop.
    // One that grants or edits is not, and is sent once.
    const retry = body['remember'] === undefined && body['detail'] === undefined && body['params'] === undefined;
    return same<Action>({ id }, await this.send({ method: 'POST', path: `/v1/actions/${encodeURIComponent(id)}/approve`, body, retry, signal: options.signal }));
  }

  /** Denies a pending action; the agent sees `reason`. */
  async deny(id: string, options: CallOptions & { reason?: string } = {}): Promise<Action> {
    const body = options.reason !== undefined ? { reason: options.reason } : {};
    return same<Action>({ id }, await this.send({ method: 'POST', path: `/v1/actions/${encodeURIComponent(id)}/deny`, body, retry: true, signal: options.signal }));
  }

  /** Grants `{handler, permission, scope}` or `{tool, pattern}` until `expires`. */
  async grant(options: GrantOptions): Promise<Grant> {
    if ((options.tool === undefined) === (options.handler === undefined)) {
      throw new RangeError('grant either handler and permission, or tool and pattern');
    }
    const { signal, idempotencyKey, ...fields } = options;
    const body: Record<string, unknown> = { expires: '1h' };
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) body[k] = v;
    // One key for every attempt: a retry after a 503 or a dropped
    // connection answers the grant the first attempt made, never a second.
    body['idempotency_key'] = idempotencyKey ?? randomKey();
    const created = object<{ grant?: Grant } & Grant>(await this.send({ method: 'POST', path: '/v1/grants', body, retry: true, signal }));
    return (created.grant ?? created) as Grant;
  }

  /** Revokes a grant. */
  async revoke(id: string, options: CallOptions = {}): Promise<Grant> {
    return object<Grant>(await this.send({ method: 'DELETE', path: `/v1/grants/${encodeURIComponent(id)}`, signal: options.signal }));
  }

  /** Every grant request, oldest first (pending ones by default; `status: null` for all), page after page. */
  async grantRequests(options: CallOptions & { status?: string | null } = {}): Promise<GrantRequest[]> {
    return this.afterPages<GrantRequest>('/v1/grant-requests', 500, options);
  }

  /** Every plan, oldest first (pending ones by default; `status: null` for all), page after page. */
  async plans(options: CallOptions & { status?: string | null } = {}): Promise<Plan[]> {
    return this.afterPages<Plan>('/v1/plans', 200, options);
  }

  /**
   * Every item of a listing paged by `after`, oldest first, `limit` a page:
   * a page shorter than that is the last, unless the daemon cut it short
   * for its size and links the next (`Link: <…>; rel="next"`).
   */
  private async afterPages<T extends { id: string }>(path: string, limit: number, options: CallOptions & { status?: string | null }): Promise<T[]> {
    const status = options.status === undefined ? 'pending' : (options.status ?? undefined);
    const items: T[] = [];
    let after: string | undefined;
    for (;;) {
      let linked = false;
      const onHeaders = (h: Headers) => {
        linked = /;\s*rel="next"/.test(h.get('link') ?? '');
      };
      const data = await this.send<unknown>({ method: 'GET', path, query: { status, order: 'oldest', limit, after }, retry: true, signal: options.signal, onHeaders });
      const page = Array.isArray(data) ? (data as T[]) : [];
      items.push(...page);
      if (page.length === 0 || (page.length < limit && !linked)) return items;
      after = page[page.length - 1]?.id;
    }
  }

  /** Approves a plan: every step, or those at `steps` (indices from 0); each approved step may then run once in the plan's session. */
  async approvePlan(id: string, options: CallOptions & { steps?: number[] } = {}): Promise<Plan> {
    const body: Record<string, unknown> = {};
    if (options.steps !== undefined) {
      if (options.steps.length === 0 || !options.steps.every((i) => Number.isInteger(i) && i >= 0)) {
        throw new RangeError("steps must be indices of the plan's steps (0, 1, ...), at least one");
      }
      body['steps'] = options.steps;
    }
    return object<Plan>(await this.send({ method: 'POST', path: `/v1/plans/${encodeURIComponent(id)}/approve`, body, retry: true, signal: options.signal }));
  }

  /** Denies a plan. */
  async denyPlan(id: string, options: CallOptions = {}): Promise<Plan> {
    return object<Plan>(await this.send({ method: 'POST', path: `/v1/plans/${encodeURIComponent(id)}/deny`, retry: true, signal: options.signal }));
  }

  /** Approves a grant request, optionally narrower or shorter than asked. */
  async approveGrantRequest(id: string, options: CallOptions & { scope?: Record<string, unknown>; expires?: string } = {}): Promise<GrantRequest> {
    const body: Record<string, unknown> = {};
    if (options.scope !== undefined) body['scope'] = options.scope;
    if (options.expires !== undefined) body['expires'] = options.expires;
    // As asked, a retry is answered as it stands; narrowed, it is sent once.
    const retry = options.scope === undefined && options.expires === undefined;
    return object<GrantRequest>(await this.send({ method: 'POST', path: `/v1/grant-requests/${encodeURIComponent(id)}/approve`, body, retry, signal: options.signal }));
  }

  /** Denies a grant request; the agent sees `reason`. */
  async denyGrantRequest(id: string, options: CallOptions & { reason?: string } = {}): Promise<GrantRequest> {
    const body = options.reason !== undefined ? { reason: options.reason } : {};
    return object<GrantRequest>(await this.send({ method: 'POST', path: `/v1/grant-requests/${encodeURIComponent(id)}/deny`, body, retry: true, signal: options.signal }));
  }

  /**
   * The signed receipt of a decided action (`{action_id, receipt, claims}`);
   * check it offline with {@link verifyReceipt} and {@link receiptKey}.
   */
  async receipt(id: string, options: CallOptions = {}): Promise<{ action_id: string; receipt: string; claims: ReceiptClaims; params_key?: string }> {
    return object(await this.send({ method: 'GET', path: `/v1/actions/${encodeURIComponent(id)}/receipt`, retry: true, signal: options.signal }));
  }

  /** The daemon's public receipt key, an Ed25519 JWK (fetch it once and keep it). */
  async receiptKey(options: CallOptions = {}): Promise<JsonWebKey> {
    return object<JsonWebKey>(await this.send({ method: 'GET', path: '/.well-known/actiongate-receipt-key', retry: true, signal: options.signal }));
  }

  /** The caller's key id, name, role and agent. */
  async whoami(options: CallOptions = {}): Promise<WhoAmI> {
    return object<WhoAmI>(await this.send({ method: 'GET', path: '/v1/whoami', retry: true, signal: options.signal }));
  }

  // --------------------------------------------------------------- gating

  /**
   * Wraps a function so it runs only once the gate allows it: the call
   * waits up to `wait` seconds (default 60) for a human. The detail is,
   * unless given, its arguments as compact JSON ({@link compactJson}: a
   * `Set`, a `Map`, a `BigInt` as what they hold; one JSON cannot show
   * throws, and the function does not run). {@link Denied},
   * {@link Expired}, {@link TimedOut} or any other error means the
   * function did not run. With `report` (default true) the outcome is
   * recorded on the action.
   */
  gate<A extends unknown[], R>(
    fn: (...args: A) => R | Promise<R>,
    options: { tool?: string; detail?: string | ((...args: A) => string); wait?: number; reason?: string; timeout?: Duration; report?: boolean; session?: string } = {},
  ): (...args: A) => Promise<R> {
    const tool = options.tool ?? (fn.name || 'function');
    return async (...args: A): Promise<R> => {
      const detail =
        typeof options.detail === 'function' ? options.detail(...args) : (options.detail ?? compactJson(args.length === 1 ? args[0] : args));
      const action = await this.approved(tool, detail, {
        wait: options.wait ?? 60,
        reason: options.reason,
        timeout: options.timeout,
        session: options.session,
      });
      let result: R;
      try {
        result = await fn(...args);
      } catch (e) {
        if (options.report !== false) {
          await this.report(action.id, 'failed', { error: String(e).slice(0, 4096) }).catch(() => {});
        }
        throw e;
      }
      if (options.report !== false) await this.report(action.id, 'completed').catch(() => {});
      return result;
    };
  }

  /**
   * Asks and waits; resolves to the action only when it may go ahead,
   * else throws ({@link Denied}, {@link Expired}, {@link TimedOut}: a
   * request still pending when the wait ran out is withdrawn).
   */
  async approved(tool: string, detail: string, options: RequestOptions = {}): Promise<Action> {
    // Asking, withdrawing and reading back share one deadline: the wait
    // plus the client's timeout.
    const deadline = this.deadline((options.wait ?? 0) * 1000);
    let action = await this.request(tool, detail, options);
    if (action.status === 'pending') {
      const path = `/v1/actions/${encodeURIComponent(action.id)}`;
      await this.send({ method: 'POST', path: `${path}/cancel`, deadline }).catch(() => undefined);
      // Read it back: an operator may have decided just before the cancel.
      action = same<Action>(action, await this.send({ method: 'GET', path, retry: true, deadline, signal: options.signal }));
      if (action.status === 'pending' || action.status === 'cancelled') {
        throw new TimedOut(`no decision within ${options.wait ?? 0} s; the request was withdrawn`, action);
      }
    }
    return settle(action);
  }
}

/** Returns the action if it may go ahead, else throws the matching error. */
export function settle(action: Action): Action {
  // Approved as an approver edited it, not as called: the original call
  // must not run (the error carries the action and its approved_detail).
  if (wasApproved(action) && action.edited === true) {
    const what = typeof action.approved_detail === 'string' ? `; the approved call is: ${action.approved_detail}` : '';
    throw new Denied(`an operator changed this call before approving it, so it does not run as asked${what}`, action);
  }
  if (isApproved(action)) return action;
  // Decision-only and reported: what the same idempotency key answers after
  // the agent ran it. One approval runs once.
  if (wasApproved(action) || action.status === 'failed') {
    throw new ActionGateError(`action ${action.id} was run already (${action.status}); it does not run again`);
  }
  if (action.status === 'denied') throw new Denied(denialReason(action), action);
  if (action.status === 'expired') throw new Expired(action);
  if (action.status === 'cancelled') throw new Denied(action.decision_note || 'cancelled', action);
  if (action.status === 'pending') throw new TimedOut('no decision yet', action);
  throw new ActionGateError(`action ${action.id} is ${JSON.stringify(action.status)}, not approved`);
}
