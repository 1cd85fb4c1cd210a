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
import { sanitizeTool, shownInput } from './claude-tools.js';

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
  /**
   * Why the call may do more than its tool and detail say (the action's
   * `caution`): no rule or grant allows it then, only an operator's
   * approval of this very call.
   */
  caution?: string;
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

/** The most characters of a detail the daemon takes (`MAX_DETAIL`), with room to spare. */
const MAX_DETAIL = 60_000;

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

  /**
   * The gate action of one framework tool call. An input too large for a
   * detail (the daemon takes 64 Ki characters: a file's whole body, say)
   * is asked with its detail cut and the input shown as params, cut too,
   * and with a caution, so no rule or grant allows it, only an operator
   * who read it (a deny rule still sees the detail's start).
   */
  call(name: string, input: Record<string, unknown>, reason?: string): ToolCall {
    const mapped = this.options.tools?.[name];
    const tool = mapped?.tool ?? sanitizeTool(name);
    const detail = mapped?.detail ? mapped.detail(input) : compactJson(input);
    const asked = { tool, detail, reason: reason ?? this.options.reason };
    if ([...detail].length <= MAX_DETAIL) return asked;
    return {
      ...asked,
      detail: `${[...detail].slice(0, MAX_DETAIL - 64).join('')}…[cut: the whole input is in params]`,
      params: shownInput(input),
      caution: `the call's input is too large to show whole in its detail (${[...detail].length} characters): only an operator who read it may allow it`,
    };
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
      // Only an operator's approval allows a cautioned call.
      if (asked.caution !== undefined) return true;
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
        caution: call.caution,
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
          return await this.client.request(c.tool, c.detail, { params: c.params, caution: c.caution, reason: c.reason, timeout: this.options.timeout, session: this.options.session ?? c.session, signal });
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
