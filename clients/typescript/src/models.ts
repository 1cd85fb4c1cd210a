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
/** A task's steps asked for at once (docs/sessions.md). */
export type Plan = Schemas['Plan'];
/** One step of a plan as an agent sends it. */
export type PlanStepRequest = Schemas['PlanStepRequest'];
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

/**
 * A human or the policy approved it (for handler actions: or it ran), as
 * asked or as an approver edited it.
 */
export function wasApproved(action: Pick<Action, 'status'>): boolean {
  return action.status === 'approved' || action.status === 'running' || action.status === 'completed';
}

/**
 * The agent may go ahead with the call as it asked: approved and not
 * edited. A decision-only action only while `approved`: once it is
 * `running` or `completed` the agent has run it (the same idempotency key
 * answers with that action again), and running it again would be a
 * second run on one approval. A handler action's executor runs it, so
 * `running` and `completed` are go-ahead for reading its result.
 */
export function isApproved(action: Pick<Action, 'status' | 'handler' | 'edited'>): boolean {
  if (action.edited === true) return false;
  return action.handler ? wasApproved(action) : action.status === 'approved';
}

/** The operator's reason when a human decided, else the policy's. */
export function denialReason(action: Action): string {
  return action.decision_note || action.decision?.reason || action.status;
}

/** The steps (from 0) of an approved plan that run once without another question. */
export function approvedSteps(plan: Pick<Plan, 'status' | 'steps'>): number[] {
  if (plan.status !== 'approved') return [];
  return plan.steps.flatMap((s, i) => (s.approved ? [i] : []));
}

/** The steps of a plan that ask a human when they run, and why. */
export function askingSteps(plan: Pick<Plan, 'steps'>): Map<number, string> {
  return new Map(plan.steps.flatMap((s, i) => (typeof s.asks === 'string' ? [[i, s.asks] as [number, string]] : [])));
}
