/**
 * What the daemon answers. The shapes are the generated OpenAPI types
 * (`openapi.ts`); the helpers here read them the way the daemon means them.
 */
import type { components } from './openapi.js';

type Schemas = components['schemas'];

/** An action an agent asked for, and everything decided about it. */
export type Action = Schemas['Action'];
/** The policy's answer to an action. */
export type Decision = Schemas['Decision'];
/** What `POST /v1/check` answers: `result` is `allow`, `ask` or `deny`. */
export type CheckResult = Schemas['CheckResult'];
/** An action's status. */
export type ActionStatus = Schemas['ActionStatus'];
/** A standing permission a human gave. */
export type Grant = Schemas['GrantRecord'];
/** An agent's request for a permission. */
export type GrantRequest = Schemas['GrantRequest'];
/** Who a key belongs to. */
export type WhoAmI = Schemas['WhoAmI'];
/** A page of actions. */
export type ActionPage = Schemas['ActionPage'];

/** One event of `GET /v1/events` (`type` is e.g. `action.enqueued`). */
export interface Event {
  /** The event's sequence number; null only for a `reset` message. */
  seq: number | null;
  type: string;
  data: Record<string, unknown>;
}

const SETTLED_HANDLER = new Set(['completed', 'failed', 'denied', 'expired', 'cancelled']);
const SETTLED_DECISION_ONLY = new Set(['approved', 'denied', 'expired', 'cancelled', 'completed', 'failed']);

/**
 * Nothing more will happen to it. For decision-only actions `approved` is
 * settled: the agent runs it itself.
 */
export function isSettled(action: Pick<Action, 'status' | 'handler'>): boolean {
  return action.handler ? SETTLED_HANDLER.has(action.status) : SETTLED_DECISION_ONLY.has(action.status);
}

/** The agent may go ahead: approved (or, for handler actions, run). */
export function isApproved(action: Pick<Action, 'status'>): boolean {
  return action.status === 'approved' || action.status === 'running' || action.status === 'completed';
}

/** The operator's reason when a human decided, else the policy's. */
export function denialReason(action: Action): string {
  return action.decision_note || action.decision?.reason || action.status;
}
