/**
 * What the framework adapters share: naming a tool call as a gate action,
 * asking about it and waiting (bounded) for a human, and reading the answer
 * as a verdict, failing closed: an error, an unreachable daemon or a wait
 * that ran out is never a "yes".
 */
import type { Client } from './client.js';
import { ActionGateError, Denied, TimedOut } from './errors.js';
import { denialReason, isApproved, isSettled, wasApproved } from './models.js';
import type { Action, CheckResult } from './models.js';

/** A tool call to ask about: the gate's tool name, detail and reason. */
export interface ToolCall {
  tool: string;
  detail: string;
  reason?: string;
  /**
   * The runtime's own session for this call (Claude's `session_id`), used
   * when the gatekeeper was given no `session`.
   */
  session?: string;
  /**
   * The call's input, shown to the humans who decide (a file write's
   * content, an edit's old and new text); the policy reads only the tool
   * and detail.
   */
  params?: Record<string, unknown>;
}

/** The gate's answer to one tool call: run it, or not and why. */
export interface Verdict {
  approved: boolean;
  /** Why not, worded for the model. Empty when approved. */
  message: string;
  action?: Action;
}

export interface GatekeeperOptions {
  /** Seconds to wait for a human on an asked call (default 300). */
  wait?: number;
  /** How long the humans have to decide (the action's deadline), e.g. `"10m"`. */
  timeout?: string | number;
  /** Shown to the human (default: which framework and tool). */
  reason?: string;
  /** The run or task these calls belong to (the action's `session`). */
  session?: string;
  /**
   * Per framework tool name: the gate's tool name and how to spell the
   * detail from the call's input (default: the name, and the input as
   * compact JSON).
   */
  tools?: Record<string, { tool?: string; detail?: (input: Record<string, unknown>) => string }>;
}

/**
 * The default detail: the input as compact JSON. A value JSON has no
 * spelling for keeps what it holds: a `BigInt` is its digits, a `Set` its
 * members, a `Map` its entries, an object with a text form of its own (a
 * `RegExp`, a `URL`) that text. One that would be written as less than it
 * holds (a function, a symbol, an object with nothing JSON can see, a
 * cycle) throws, and the call is refused: a detail that hides part of the
 * call would let a human or a rule approve what they never saw.
 */
export function compactJson(input: unknown): string {
  return (
    JSON.stringify(input ?? {}, (_key, value: unknown) => {
      if (typeof value === 'bigint') return value.toString();
      if (typeof value === 'function' || typeof value === 'symbol') {
        throw new TypeError(`the call's input holds a ${typeof value}, which no detail can show`);
      }
      if (value instanceof Set) return [...value];
      if (value instanceof Map) return [...value.entries()];
      if (value !== null && typeof value === 'object' && !Array.isArray(value) && !('toJSON' in value)) {
        const proto = Object.getPrototypeOf(value);
        if (proto !== Object.prototype && proto !== null && Object.keys(value).length === 0) {
          const text = String(value);
          if (text === '[object Object]') throw new TypeError("the call's input holds an object with nothing JSON can show");
          return text;
        }
      }
      return value;
    }) ?? '{}'
  );
}

/** Gate tool names are 1-128 of `[A-Za-z0-9_.-]`; anything else becomes `_` (as the hooks do). */
function sanitize(name: string): string {
  const s = name.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 128);
  return s || 'tool';
}

/**
 * A path with `.`, `..` and repeated `/` resolved lexically, as the hooks
 * do, so the action names the file the tool touches: `/repo/../etc/x` is
 * `/etc/x`, which a pattern allowing `/repo/.*` must not cover.
 */
export function normalizePath(path: string): string {
  const absolute = path.startsWith('/');
  const parts: string[] = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (parts.length > 0 && parts[parts.length - 1] !== '..') parts.pop();
      else if (!absolute) parts.push('..');
      continue;
    }
    parts.push(part);
  }
  const joined = parts.join('/');
  return absolute ? `/${joined}` : joined || '.';
}

/**
 * `path` under the working directory `cwd` when it is relative and `cwd`
 * absolute, as the hooks join it: that is where the runtime resolves it.
 * A path from the home directory (`~`, `~/…`) stays as written, and so
 * does every path without an absolute `cwd`.
 */
function joinPath(path: string, cwd?: string): string {
  if (!cwd?.startsWith('/') || path.startsWith('/') || path === '~' || path.startsWith('~/')) return path;
  return `${cwd.replace(/\/+$/, '')}/${path}`;
}

/**
 * `Glob`'s detail as the hooks spell it: `<dir>/<pattern>` unless the
 * pattern is absolute, its leading steps up to the first one holding a
 * wildcard or an escape resolved as a path is.
 */
function globDetail(pattern: string, dir?: string): string {
  const full = dir && !pattern.startsWith('/') ? `${dir.replace(/\/+$/, '')}/${pattern}` : pattern;
  let literal = 0;
  for (const step of full.match(/[^/]*\/|[^/]+$/g) ?? []) {
    if (/[*?[\]{}\\]/.test(step)) break;
    literal += step.length;
  }
  const head = full.slice(0, literal);
  const rest = full.slice(literal);
  if (!head) return full;
  const h = normalizePath(head);
  if (!rest) return h;
  if (h === '.') return rest;
  return h.endsWith('/') ? `${h}${rest}` : `${h}/${rest}`;
}

/**
 * Maps a Claude tool call (Claude Code, the Claude Agent SDK) to the gate's
 * tool and detail, exactly as `actiongate hook claude-code` does, so one
 * profile governs both: `Bash` is `bash` with the command, `Edit`/`Write`
 * are `file` with `edit <path>`/`write <path>`, MCP tools are `mcp` with
 * `<server>__<tool> <input as JSON>`. Given the session's working directory
 * `cwd` (absolute), a relative path is asked as the file under it, as the
 * hook asks it; without one it stays relative.
 */
/** Most bytes of one string of a file call's input shown to the humans who decide. */
const MAX_SHOWN_STRING = 16 * 1024;
/** Most bytes of a file call's input shown: below the daemon's 256 KiB bound on params. */
const MAX_SHOWN = 192 * 1024;

/** `value` with each string past {@link MAX_SHOWN_STRING} bytes cut, saying how much is not shown. */
function cutStrings(value: unknown): unknown {
  if (typeof value === 'string') {
    const bytes = new TextEncoder().encode(value);
    if (bytes.length <= MAX_SHOWN_STRING) return value;
    const head = new TextDecoder().decode(bytes.slice(0, MAX_SHOWN_STRING)).replace(/\uFFFD$/, '');
    return `${head}…[${bytes.length - new TextEncoder().encode(head).length} more bytes not shown]`;
  }
  if (Array.isArray(value)) return value.map(cutStrings);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, cutStrings(v)]));
  }
  return value;
}

/**
 * What a Claude file call (`Edit`, `MultiEdit`, `Write`, `NotebookEdit`)
 * shows the humans who decide, as `actiongate hook claude-code` sends it:
 * its input, long strings cut; undefined for any other call (its detail is
 * the whole call).
 */
export function claudeParams(name: string, input: Record<string, unknown>): Record<string, unknown> | undefined {
  if (!['Edit', 'MultiEdit', 'Write', 'NotebookEdit'].includes(name)) return undefined;
  const shown = cutStrings(input) as Record<string, unknown>;
  let size = Infinity;
  try {
    size = new TextEncoder().encode(JSON.stringify(shown)).length;
  } catch {
    // Not JSON: shown as a note, as one too large is.
  }
  return size <= MAX_SHOWN ? shown : { not_shown: "the tool's input is too large to show" };
}

export function mapClaudeTool(name: string, input: Record<string, unknown>, cwd?: string): { tool: string; detail: string } {
  const field = (key: string): string => {
    const v = input[key];
    if (typeof v !== 'string') throw new ActionGateError(`the ${name} call has no input.${key}`);
    return v;
  };
  const file = (key: string): string => normalizePath(joinPath(field(key), cwd));
  switch (name) {
    case 'Bash':
      return { tool: 'bash', detail: field('command') };
    case 'Edit':
    case 'MultiEdit':
      return { tool: 'file', detail: `edit ${file('file_path')}` };
    case 'Write':
      return { tool: 'file', detail: `write ${file('file_path')}` };
    case 'NotebookEdit':
      return { tool: 'file', detail: `notebook_edit ${file('notebook_path')}` };
    case 'Read':
      return { tool: 'Read', detail: file('file_path') };
    case 'Glob': {
      const path = typeof input['path'] === 'string' ? input['path'] : '';
      const dir = cwd?.startsWith('/') ? (path ? joinPath(path, cwd) : cwd) : path;
      return { tool: 'Glob', detail: globDetail(field('pattern'), dir) };
    }
    case 'Grep':
      return { tool: 'Grep', detail: field('pattern') };
    case 'WebFetch':
      return { tool: 'WebFetch', detail: field('url') };
    case 'WebSearch':
      return { tool: 'WebSearch', detail: field('query') };
    default: {
      // MCP tools `mcp__<server>__<tool>`: the name is the tool, as the
      // MCP proxy and the hooks spell it; a name that is not plain as a
      // tool name keeps server and tool in the detail of the tool `mcp`.
      const m = /^mcp__(.+?)__(.+)$/s.exec(name);
      if (m && sanitize(name) === name) return { tool: name, detail: compactJson(input) };
      if (m) return { tool: 'mcp', detail: `${m[1]}__${m[2]} ${compactJson(input)}` };
      return { tool: sanitize(name), detail: compactJson(input) };
    }
  }
}

/** Reads a settled (or still pending) action as a verdict. */
export function verdictOf(action: Action, wait: number): Verdict {
  // An approver who edited the call approved the edited one, not the call
  // the framework is about to run with its original input: refuse that one.
  if (wasApproved(action) && action.edited === true) {
    const approved = typeof action.approved_detail === 'string' ? `; the approved call is: ${action.approved_detail}` : '';
    return { approved: false, message: `Not run as asked: an operator changed this call before approving it${approved}.`, action };
  }
  if (isApproved(action)) return { approved: true, message: '', action };
  switch (action.status) {
    case 'denied':
      return { approved: false, message: `Denied by actiongate: ${denialReason(action)}`, action };
    case 'expired':
      return { approved: false, message: 'Not approved: nobody decided before the deadline.', action };
    case 'cancelled':
      return { approved: false, message: 'Not approved: the request was withdrawn.', action };
    case 'pending':
      return { approved: false, message: `Not approved: no decision within ${wait} s.`, action };
    default:
      return { approved: false, message: `Not approved: the action is ${action.status}.`, action };
  }
}

/** Fail closed: the gate could not answer, so the call does not run. */
export function failed(error: unknown): Verdict {
  const text = error instanceof Error ? error.message : String(error);
  return { approved: false, message: `Not run: actiongate could not decide (${text}).` };
}

/**
 * Asks the gate about tool calls on a framework's behalf. Every call is
 * recorded as an action (allowed ones too, so the audit has them); an
 * asked call waits up to `wait` seconds for a human, and one still pending
 * then is withdrawn and refused.
 */
export class Gatekeeper {
  readonly client: Client;
  readonly wait: number;
  private readonly options: GatekeeperOptions;

  constructor(client: Client, options: GatekeeperOptions = {}) {
    this.client = client;
    this.options = options;
    this.wait = options.wait ?? 300;
    if (!(this.wait >= 0)) throw new RangeError('wait must be a non-negative number of seconds');
  }

  /** The gate action of one framework tool call. */
  call(name: string, input: Record<string, unknown>, reason?: string): ToolCall {
    const mapped = this.options.tools?.[name];
    const tool = mapped?.tool ?? sanitize(name);
    const detail = mapped?.detail ? mapped.detail(input) : compactJson(input);
    return { tool, detail, reason: reason ?? this.options.reason };
  }

  /**
   * Whether a call needs a human: true unless the policy allows it outright
   * in this gatekeeper's session, so a session the policy holds tainted is
   * not waved through. A call the policy allows is recorded as the action
   * it is before it runs: that takes a counted grant's use or an approved
   * plan step (a check takes nothing, so a grant of one use would let
   * every call through) and puts it in the audit. Only a call stored
   * approved skips approval; one stored asked (its grant's use taken
   * meanwhile) is withdrawn and needs a human. An unreachable gate also
   * needs approval: it fails closed to a human.
   */
  async needsApproval(
    call: ToolCall | (() => ToolCall),
    signal?: AbortSignal,
    options: { denialThrows?: boolean } = {},
  ): Promise<boolean> {
    let asked: ToolCall;
    let d: CheckResult;
    try {
      asked = typeof call === 'function' ? call() : call;
      d = await this.client.check(asked.tool, asked.detail, { session: this.options.session ?? asked.session, signal });
    } catch {
      return true;
    }
    // Where whoever approves next is not the gate's operator (an app's own
    // approval prompt), a policy denial is final: no one may wave it through.
    if (d.result === 'deny' && options.denialThrows) throw new Denied(d.reason || 'denied by policy');
    if (d.result !== 'allow') return true;
    let action: Action;
    try {
      action = await this.client.request(asked.tool, asked.detail, {
        params: asked.params,
        reason: asked.reason,
        timeout: this.options.timeout,
        session: this.options.session ?? asked.session,
        wait: 0,
        signal,
      });
      if (verdictOf(action, 0).approved) return false;
      if (action.status === 'pending') await this.withdraw(action);
    } catch {
      return true;
    }
    // Denied when recorded (the policy changed since the check, say): as
    // final as a denial the check gave.
    if (action.status === 'denied' && options.denialThrows) throw new Denied(denialReason(action), action);
    return true;
  }

  /**
   * Asks about one call and waits for the verdict. Never throws: a call
   * that cannot be spelled (given as a function that throws, such as
   * `() => keeper.call(...)` over an input no detail can show) is refused.
   */
  async decide(call: ToolCall | (() => ToolCall), signal?: AbortSignal): Promise<Verdict> {
    let action: Action;
    try {
      if (typeof call === 'function') call = call();
      action = await this.client.request(call.tool, call.detail, {
        params: call.params,
        reason: call.reason,
        timeout: this.options.timeout,
        session: this.options.session ?? call.session,
        wait: this.wait,
        signal,
      });
    } catch (e) {
      return failed(e);
    }
    if (!isSettled(action) && action.status === 'pending') {
      action = await this.withdraw(action);
    }
    return verdictOf(action, this.wait);
  }

  /** Asks about several calls at once (a human sees them together), then waits for all. */
  async decideAll(calls: ToolCall[], signal?: AbortSignal): Promise<Verdict[]> {
    const deadline = Date.now() + this.wait * 1000;
    const started = await Promise.all(
      calls.map(async (c): Promise<Action | Verdict> => {
        try {
          return await this.client.request(c.tool, c.detail, { params: c.params, reason: c.reason, timeout: this.options.timeout, session: this.options.session ?? c.session, signal });
        } catch (e) {
          return failed(e);
        }
      }),
    );
    const out: Verdict[] = [];
    for (const item of started) {
      if ('approved' in item) {
        out.push(item);
        continue;
      }
      let action = item;
      try {
        if (!isSettled(action)) action = await this.client.wait(action.id, Math.max(0, (deadline - Date.now()) / 1000), { signal });
      } catch (e) {
        if (e instanceof TimedOut) {
          action = await this.withdraw(e.action ?? action);
        } else {
          out.push(failed(e));
          continue;
        }
      }
      out.push(verdictOf(action, this.wait));
    }
    return out;
  }

  private async withdraw(action: Action): Promise<Action> {
    try {
      return await this.client.cancel(action.id);
    } catch {
      // Decided meanwhile (409), or unreachable: read it back if possible.
      try {
        return await this.client.get(action.id);
      } catch {
        return action;
      }
    }
  }
}
