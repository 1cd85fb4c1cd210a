//! Wire types of sessions, plans and reported runs (issue 33,
//! docs/sessions.md).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A session: the task an agent's actions belong to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Session {
    /// The id the agent runtime gave it.
    pub id: String,
    /// The agent whose session it is.
    pub agent: String,
    /// The runtime last seen sending its actions.
    pub runtime: Option<String>,
    /// When its first action (or plan) came.
    #[serde(serialize_with = "crate::rfc3339::serialize")]
    pub first_seen: DateTime<Utc>,
    /// When its latest one came.
    #[serde(serialize_with = "crate::rfc3339::serialize")]
    pub last_seen: DateTime<Utc>,
    /// `active` or `ended` (explicitly, or idle past the timeout).
    pub status: String,
    /// When it ended.
    #[serde(serialize_with = "crate::rfc3339::option")]
    pub ended_at: Option<DateTime<Utc>>,
    /// Who ended it: `idle` (not seen for `sessions.idle_timeout`), or the
    /// identity of the key that ended it (`key:<id>`).
    #[serde(default)]
    pub ended_by: Option<String>,
    /// The action that tainted it (read untrusted content), if any.
    pub tainted_by: Option<String>,
    /// That action's action string.
    pub taint_action: Option<String>,
    /// When it was tainted (an action let run, a run reported, a taint
    /// carried in over `/mcp`).
    #[serde(serialize_with = "crate::rfc3339::option")]
    pub tainted_at: Option<DateTime<Utc>>,
    /// How many of its actions are in each status, and `total`.
    #[schema(value_type = Object)]
    pub actions: std::collections::BTreeMap<String, i64>,
}

/// One step of a plan: a decision-only action or a handler action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanStep {
    /// Tool (decision-only step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Detail (decision-only step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Handler id (handler step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler: Option<String>,
    /// Action name (handler step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Params (handler step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub params: Option<Value>,
    /// Whether an operator approved it (answers only).
    #[serde(default)]
    pub approved: bool,
    /// The session grants its approval made (answers only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
    /// Why the step asks a human when it runs even with the plan approved
    /// (answers only): an approvals rule governs it (one approver's grant
    /// does not settle what such a rule governs; its approvers decide), or
    /// the session is tainted and the step is guarded. Approving the plan
    /// grants such a step nothing. Read when the plan is asked and again
    /// when it is approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asks: Option<String>,
}

/// A decision-only plan step as an agent sends it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanToolStep {
    /// Tool name; 1-128 of `A-Z a-z 0-9 _ - .`.
    #[schema(
        pattern = r"^[A-Za-z0-9_.\-]{1,128}$",
        min_length = 1,
        max_length = 128
    )]
    pub tool: String,
    /// Tool-specific detail, e.g. the command line.
    #[schema(max_length = 65536)]
    pub detail: String,
}

/// A handler plan step as an agent sends it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanHandlerStep {
    /// Handler id.
    pub handler: String,
    /// Action name.
    pub action: String,
    /// Params, validated against the action's `params_schema`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub params: Option<Value>,
}

/// One step of `POST /v1/plans`: `{tool, detail}` or `{handler, action, params}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum PlanStepRequest {
    /// `{handler, action, params}`.
    Handler(PlanHandlerStep),
    /// `{tool, detail}`.
    Tool(PlanToolStep),
}

impl From<PlanStepRequest> for PlanStep {
    fn from(s: PlanStepRequest) -> PlanStep {
        let blank = PlanStep {
            tool: None,
            detail: None,
            handler: None,
            action: None,
            params: None,
            approved: false,
            grants: Vec::new(),
            asks: None,
        };
        match s {
            PlanStepRequest::Tool(t) => PlanStep {
                tool: Some(t.tool),
                detail: Some(t.detail),
                ..blank
            },
            PlanStepRequest::Handler(h) => PlanStep {
                handler: Some(h.handler),
                action: Some(h.action),
                params: h.params,
                ..blank
            },
        }
    }
}

/// `POST /v1/plans`: steps an agent asks approval for at once.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePlan {
    /// Why (shown to the human).
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
    /// The session the steps will run in.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}](?:[^\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}]{0,198}[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}])?$"
    )]
    pub session: String,
    /// The runtime sending it, a short slug (1-64 of `a-z 0-9 - _ .`).
    #[serde(default)]
    #[schema(pattern = r"^[a-z0-9][a-z0-9_.\-]{0,63}$")]
    pub runtime: Option<String>,
    /// 1-200 steps.
    #[schema(min_items = 1, max_items = 200)]
    pub steps: Vec<PlanStepRequest>,
    /// Makes a retry safe: the same key from the same agent with the same
    /// body answers the plan made the first time (200), asking no human
    /// twice; with another body it is a 409.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    pub idempotency_key: Option<String>,
}

/// A plan as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Plan {
    /// Time-ordered id.
    pub id: String,
    /// The agent that asked.
    pub agent: String,
    /// The session its steps run in.
    pub session: String,
    /// Why.
    pub reason: Option<String>,
    /// `pending`, `approved`, `denied`, or `expired` (its session ended
    /// before anyone decided).
    pub status: String,
    /// Its steps.
    pub steps: Vec<PlanStep>,
    /// When it was asked for.
    #[serde(serialize_with = "crate::rfc3339::serialize")]
    pub created_at: DateTime<Utc>,
    /// When it was decided.
    #[serde(serialize_with = "crate::rfc3339::option")]
    pub decided_at: Option<DateTime<Utc>>,
    /// Who decided.
    pub decided_by: Option<String>,
}

/// `POST /v1/plans/{id}/approve`: the whole plan, or only some steps.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovePlan {
    /// Indices (from 0) of the steps approved; absent: every step.
    #[serde(default)]
    pub steps: Option<Vec<usize>>,
}

/// `POST /v1/runs`: what actually ran, as a runtime's post-tool hook saw it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportRun {
    /// Tool (or handler id) that ran; 1-128 of `A-Z a-z 0-9 _ - .`.
    #[schema(
        pattern = r"^[A-Za-z0-9_.\-]{1,128}$",
        min_length = 1,
        max_length = 128
    )]
    pub tool: String,
    /// Its detail.
    #[serde(default)]
    #[schema(max_length = 65536)]
    pub detail: String,
    /// The session it ran in (1-200 printable characters).
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}](?:[^\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}]{0,198}[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}])?$"
    )]
    pub session: Option<String>,
    /// The runtime reporting it, a short slug (1-64 of `a-z 0-9 - _ .`).
    #[serde(default)]
    #[schema(pattern = r"^[a-z0-9][a-z0-9_.\-]{0,63}$")]
    pub runtime: Option<String>,
    /// The id of the action that allowed it, when the runtime knows it
    /// (an action id, a UUID: anything else is 422).
    #[serde(default)]
    #[schema(max_length = 36)]
    pub action: Option<String>,
}

/// The answer to a reported run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunMatched {
    /// Whether an allow or an approval of the gate covers it.
    pub decided: bool,
    /// The action that did.
    pub action: Option<String>,
}
