/**
 * actiongate: ask the gate before an agent acts.
 *
 * ```ts
 * import { Client } from 'actiongate';
 * const gate = new Client();            // ACTIONGATE_URL, ACTIONGATE_KEY
 * const d = await gate.check('bash', 'ls -la');
 * const a = await gate.request('bash', 'git push', { wait: 300 });
 * ```
 */
export { Client, settle, VERSION } from './client.js';
export type { ApproveOptions, CallOptions, ClientOptions, Duration, EventsOptions, GrantOptions, PermissionOptions, PlanOptions, RememberOptions, RequestOptions } from './client.js';
export { Aborted, ActionGateError, ApiError, Denied, Expired, TimedOut, Unreachable } from './errors.js';
export type { FieldError } from './errors.js';
export { approvedSteps, askingSteps, denialReason, isApproved, isSettled, wasApproved } from './models.js';
export type { Action, ActionPage, ActionStatus, CheckResult, Decision, Event, Grant, GrantRequest, Plan, PlanStepRequest, WhoAmI } from './models.js';
export { Gatekeeper, compactJson } from './adapters.js';
export { claudeParams, mapClaudeCalls, mapClaudeTool } from './claude-tools.js';
export type { ClaudeAction, ClaudeCalls } from './claude-tools.js';
export type { ToolCall, Verdict, GatekeeperOptions } from './adapters.js';
export { InvalidReceipt, paramsDigest, verifyReceipt } from './receipts.js';
export type { ReceiptClaims, ReceiptDecider } from './receipts.js';
export type { components, paths } from './openapi.js';
