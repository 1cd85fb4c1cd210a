/**
 * Errors of the actiongate client. Every one is an {@link ActionGateError};
 * none of them ever means "go ahead": code that gates an action must treat
 * each as a refusal.
 */
import type { Action } from './models.js';

/** Base class of every error this package throws. */
export class ActionGateError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** One invalid field of a request, from a problem's `errors` list. */
export interface FieldError {
  field: string;
  message: string;
}

/**
 * The daemon answered with an error (RFC 9457 problem+json). `status` is
 * the HTTP status, `code` the stable machine-readable code, `title` and
 * `detail` the problem's text, `errors` the invalid fields of a validation
 * error, `problem` the whole body (empty when it was not problem+json).
 */
export class ApiError extends ActionGateError {
  readonly status: number;
  readonly code: string;
  readonly title: string;
  readonly detail: string;
  readonly errors: FieldError[];
  readonly problem: Record<string, unknown>;

  constructor(init: {
    status: number;
    code: string;
    title: string;
    detail?: string;
    errors?: FieldError[];
    problem?: Record<string, unknown>;
  }) {
    const text = init.detail ? `${init.title}: ${init.detail}` : init.title;
    super(`${text} (HTTP ${init.status})`);
    this.status = init.status;
    this.code = init.code;
    this.title = init.title;
    this.detail = init.detail ?? '';
    this.errors = init.errors ?? [];
    this.problem = init.problem ?? {};
  }

  /** For conflicts over an action's state: the status it has now. */
  get currentStatus(): string | undefined {
    const v = this.problem['current_status'];
    return typeof v === 'string' ? v : undefined;
  }
}

/** The daemon could not be reached (refused, reset, DNS, timeout). */
export class Unreachable extends ActionGateError {}

/**
 * The action was denied, by the policy or by a human, or withdrawn.
 * `reason` is the operator's reason when a human denied it, else the
 * policy's.
 */
export class Denied extends ActionGateError {
  readonly reason: string;
  readonly action: Action | undefined;
  constructor(reason: string, action?: Action) {
    super(`denied: ${reason}`);
    this.reason = reason;
    this.action = action;
  }
}

/** Nobody decided before the action's deadline (not a denial, not an allow). */
export class Expired extends ActionGateError {
  readonly action: Action | undefined;
  constructor(action?: Action) {
    super('expired: nobody decided before the deadline');
    this.action = action;
  }
}

/** The caller's wait ran out while the action was still undecided. */
export class TimedOut extends ActionGateError {
  readonly action: Action | undefined;
  constructor(message: string, action?: Action) {
    super(message);
    this.action = action;
  }
}

/** The caller's `AbortSignal` fired. */
export class Aborted extends ActionGateError {}
