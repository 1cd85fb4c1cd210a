//! The records the daemon keeps, in the shape the API shows them (the
//! store reads and writes these very types).

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use utoipa::ToSchema;

/// Where an action stands. See DESIGN.md "Model" for which are settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ActionStatus {
    /// Waiting for a human.
    Pending,
    /// Allowed by policy, a grant or a human.
    Approved,
    /// Being executed by a handler.
    Running,
    /// Finished successfully.
    Completed,
    /// Finished unsuccessfully.
    Failed,
    /// Refused by policy or a human.
    Denied,
    /// Nobody decided before the deadline (not a denial).
    Expired,
    /// Withdrawn by the agent or an operator while pending.
    Cancelled,
}

impl ActionStatus {
    /// Every status, for validation messages.
    pub const ALL: [ActionStatus; 8] = [
        ActionStatus::Pending,
        ActionStatus::Approved,
        ActionStatus::Running,
        ActionStatus::Completed,
        ActionStatus::Failed,
        ActionStatus::Denied,
        ActionStatus::Expired,
        ActionStatus::Cancelled,
    ];

    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionStatus::Pending => "pending",
            ActionStatus::Approved => "approved",
            ActionStatus::Running => "running",
            ActionStatus::Completed => "completed",
            ActionStatus::Failed => "failed",
            ActionStatus::Denied => "denied",
            ActionStatus::Expired => "expired",
            ActionStatus::Cancelled => "cancelled",
        }
    }

    /// Whether nothing more will happen to a decision-only action (the agent
    /// runs it itself, so `approved` is final for the gate).
    pub fn is_settled_decision_only(self) -> bool {
        !matches!(self, ActionStatus::Pending)
    }

    /// Whether nothing more will happen to an action in this status, run by
    /// a handler or not.
    pub fn is_settled(self, by_handler: bool) -> bool {
        if by_handler {
            self.is_settled_handler()
        } else {
            self.is_settled_decision_only()
        }
    }

    /// Whether nothing more will happen to an action run by a handler.
    pub fn is_settled_handler(self) -> bool {
        matches!(
            self,
            ActionStatus::Completed
                | ActionStatus::Failed
                | ActionStatus::Denied
                | ActionStatus::Expired
                | ActionStatus::Cancelled
        )
    }
}

impl fmt::Display for ActionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ActionStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ActionStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown status '{s}'"))
    }
}

/// The policy's answer as recorded on an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DecisionResult {
    /// Proceed without asking.
    Allow,
    /// A human must decide.
    Ask,
    /// Refused.
    Deny,
}

impl DecisionResult {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionResult::Allow => "allow",
            DecisionResult::Ask => "ask",
            DecisionResult::Deny => "deny",
        }
    }
}

impl FromStr for DecisionResult {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow" => Ok(DecisionResult::Allow),
            "ask" => Ok(DecisionResult::Ask),
            "deny" => Ok(DecisionResult::Deny),
            other => Err(format!("unknown decision '{other}'")),
        }
    }
}

/// Why the policy answered as it did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Decision {
    /// allow, ask or deny.
    pub result: DecisionResult,
    /// A sentence saying why; secret-shaped text in it (it may quote the
    /// command) is masked as `••••` when an action is shown.
    pub reason: String,
    /// The pattern or grant that decided, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<Value>,
}

/// What the agent (or executor) reported after running an approved action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Outcome {
    /// `completed` or `failed`.
    pub status: ActionStatus,
    /// Result payload, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Error text, if it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An action an agent asked for, and everything decided about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Action {
    /// Time-ordered id (UUIDv7).
    pub id: String,
    /// The agent that asked.
    pub agent: String,
    /// Tool name (or handler id).
    pub tool: String,
    /// Tool-specific detail, e.g. the shell command.
    pub detail: String,
    /// `tool:<tool>:<detail>`.
    pub action_string: String,
    /// Why the agent wants it.
    pub reason: Option<String>,
    /// Where it stands.
    pub status: ActionStatus,
    /// The policy's answer.
    pub decision: Decision,
    /// What the analyser finds the action may do: the command's programs
    /// and hazards for shell tools (and a handler's `command`), the tool
    /// and handler names otherwise. Shown to humans (the page's risk
    /// badge); it never changes a verdict.
    #[serde(default)]
    pub findings: Vec<crate::Finding>,
    /// When it was requested.
    #[serde(serialize_with = "crate::rfc3339::serialize")]
    pub created_at: DateTime<Utc>,
    /// When it was decided (by policy or a human).
    #[serde(serialize_with = "crate::rfc3339::option")]
    pub decided_at: Option<DateTime<Utc>>,
    /// Who decided: `policy` (the profile, when it was asked), `grant:<id>`
    /// (a standing grant when it was asked, or one made for it while it
    /// waited), `key:<id>` of an operator, `deadline`.
    pub decided_by: Option<String>,
    /// When a pending action expires.
    #[serde(serialize_with = "crate::rfc3339::option")]
    pub deadline: Option<DateTime<Utc>>,
    /// The reported outcome, once there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// A note or reason given by the human who decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision_note: Option<String>,
    /// The handler that runs it (handler actions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handler: Option<String>,
    /// The handler's action name (handler actions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// A handler action's params, with the values its handler marks
    /// sensitive masked as `"***"`; or a decision-only action's params as
    /// its agent sent them (the tool call's input, shown to the humans who
    /// decide; the page and chat cards mask secret-shaped values).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub params: Option<Value>,
    /// The permission it needs (handler actions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission: Option<String>,
    /// Its scope: the permission's keys with this action's values.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub scope: Option<serde_json::Map<String, Value>>,
    /// How the handler asks for it to be shown: `{title, summary?, fields?}`,
    /// rendered from `params` with secret-shaped text (tokens, `-u
    /// user:pass`, `Authorization:` headers, `password=`) masked as `••••`;
    /// the exact values are in `params`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub display: Option<Value>,
    /// What the handler declares about this action (`destructive`,
    /// `read_only`, ...), as it was when the action was asked: shown to
    /// humans (the page's risk badge), never read by the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hints: Option<crate::handlers::ActionHints>,
    /// Delivery attempts to the handler's executor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<ActionAttempt>,
    /// The session it belongs to, as the agent runtime named it (null when
    /// the agent named none).
    #[serde(default)]
    pub session: Option<String>,
    /// The agent runtime that sent it, e.g. `claude-code` (null when none).
    #[serde(default)]
    pub runtime: Option<String>,
    /// Approvals collected, who decided, an edit (`docs/teams.md`).
    #[serde(flatten)]
    pub team: crate::teams::Team,
}

impl Action {
    /// Whether nothing more will happen to it: decision-only actions settle
    /// once decided (the agent runs them), handler actions once they ran.
    pub fn is_settled(&self) -> bool {
        self.status.is_settled(self.handler.is_some())
    }

    /// Whether it is a handler action that may reach past its handler's
    /// closed domain ([`crate::handlers::ActionHints::reaches_out`]).
    pub fn reaches_out(&self) -> bool {
        self.handler.is_some() && crate::handlers::ActionHints::reaches_out(self.hints.as_ref())
    }

    /// Whether it is a handler action whose answer is a stranger's words
    /// ([`crate::handlers::ActionHints::reads_world`]).
    pub fn reads_world(&self) -> bool {
        self.handler.is_some() && crate::handlers::ActionHints::reads_world(self.hints.as_ref())
    }
}

/// A registered handler as stored; its spec is kept as registered JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandlerRecord {
    /// Slug id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// Webhook URL.
    pub url: String,
    /// Per-attempt timeout.
    pub timeout_ms: Option<i64>,
    /// `{permissions, actions}` as registered.
    pub spec: Value,
    /// When registered.
    pub created_at: DateTime<Utc>,
    /// When last replaced.
    pub updated_at: DateTime<Utc>,
    /// When retired; its history stays readable.
    pub retired_at: Option<DateTime<Utc>>,
}

/// A standing permission given by a human.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GrantRecord {
    /// Grant id.
    pub id: String,
    /// The agent it is for; absent for any agent.
    pub agent: Option<String>,
    /// Handler (permission grants).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handler: Option<String>,
    /// Permission name (permission grants).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission: Option<String>,
    /// Scope values; a string with `*` or `?` is a glob; a missing key matches any value.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub scope: Option<serde_json::Map<String, Value>>,
    /// Tool (decision-only grants).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Full-match pattern over the detail (decision-only grants).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The pattern is for a shell tool's whole command line as sent, not
    /// for each simple command of it (a plan's step grants its line so).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub whole_line: bool,
    /// Who granted it.
    pub granted_by: String,
    /// When.
    pub granted_at: DateTime<Utc>,
    /// When it stops counting; absent: indefinite.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// A note from the human.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Neither revoked nor expired (nor used up) when this was read.
    pub active: bool,
    /// Only within this session; void once it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// How many allowed actions it was granted for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses: Option<i64>,
    /// How many of them are left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses_left: Option<i64>,
}

/// Where a grant request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum GrantRequestStatus {
    /// Waiting for a human.
    Pending,
    /// Granted (see `grant`).
    Approved,
    /// Refused.
    Denied,
    /// Nobody decided in time (not a denial).
    Expired,
}

impl GrantRequestStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            GrantRequestStatus::Pending => "pending",
            GrantRequestStatus::Approved => "approved",
            GrantRequestStatus::Denied => "denied",
            GrantRequestStatus::Expired => "expired",
        }
    }
}

impl FromStr for GrantRequestStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pending" => Ok(GrantRequestStatus::Pending),
            "approved" => Ok(GrantRequestStatus::Approved),
            "denied" => Ok(GrantRequestStatus::Denied),
            "expired" => Ok(GrantRequestStatus::Expired),
            other => Err(format!("unknown grant request status '{other}'")),
        }
    }
}

/// An agent asking a human for a permission (seed 004).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GrantRequest {
    /// Request id.
    pub id: String,
    /// The asking agent.
    pub agent: String,
    /// Handler.
    pub handler: String,
    /// Permission name.
    pub permission: String,
    /// Scope asked for.
    #[schema(value_type = Object)]
    pub scope: serde_json::Map<String, Value>,
    /// Why.
    pub reason: Option<String>,
    /// Expiry asked for (`1h`, `today`, `indefinite`, RFC 3339).
    pub expires: Option<String>,
    /// Where it stands.
    pub status: GrantRequestStatus,
    /// When it expires unanswered.
    pub deadline: DateTime<Utc>,
    /// When asked.
    pub created_at: DateTime<Utc>,
    /// When decided.
    pub decided_at: Option<DateTime<Utc>>,
    /// Who decided.
    pub decided_by: Option<String>,
    /// Why it was denied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deny_reason: Option<String>,
    /// The session the grant is limited to (void when it ends), when asked.
    #[serde(default)]
    pub session: Option<String>,
    /// The number of allowed actions the grant is limited to, when asked.
    #[serde(default)]
    pub uses: Option<i64>,
    /// The grant made by approving it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantRecord>,
}

/// What an API key may do; each role includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// An agent runtime: requests actions, sees its own.
    Agent,
    /// A human operator: sees everything, decides.
    Operator,
    /// Configures the daemon: agents, keys, handlers.
    Admin,
}

impl Role {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "agent" => Ok(Role::Agent),
            "operator" => Ok(Role::Operator),
            "admin" => Ok(Role::Admin),
            other => Err(format!(
                "unknown role '{other}' (expected agent, operator or admin)"
            )),
        }
    }
}

/// An API key as stored (never the key itself, only its hash).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApiKey {
    /// Key id (not secret).
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// The agent it acts as, if any.
    pub agent: Option<String>,
    /// When it was issued.
    pub created_at: DateTime<Utc>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// An agent and its permission profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Agent {
    /// Agent id.
    pub id: String,
    /// Display name.
    pub name: Option<String>,
    /// A preset name or `{allow, ask, deny}`; `None` means the configured default.
    #[schema(value_type = Option<Object>)]
    pub profile: Option<Value>,
    /// When first registered.
    pub created_at: DateTime<Utc>,
    /// When last changed.
    pub updated_at: DateTime<Utc>,
    /// In the answer to `PUT /v1/agents/{id}` only: what in the profile
    /// cannot work as things stand, such as an approvals rule needing more
    /// approvals than there are people who may give them (its actions
    /// could never be approved). The profile is kept all the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// An entry of the event log, which is also the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Event {
    /// Monotonic sequence number (the SSE id).
    pub seq: i64,
    /// Unique event id.
    pub id: String,
    /// Event type, e.g. `action.approved`.
    #[serde(rename = "type")]
    pub kind: String,
    /// When it happened.
    #[serde(serialize_with = "crate::rfc3339::serialize")]
    pub at: DateTime<Utc>,
    /// The agent concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The action concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    /// The grant concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
    /// The resource as it stood after the change.
    #[schema(value_type = Object)]
    pub data: Json,
}

/// JSON kept as its text. An event's data is rendered once, when the event
/// is made, and then stored, published and served as that text: no tree of
/// values to build, copy between threads and free.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Json(Box<RawValue>);

impl Json {
    /// `value` rendered as JSON.
    pub fn of<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Json> {
        serde_json::value::to_raw_value(value).map(Json)
    }

    /// `null`.
    pub fn null() -> Json {
        Json(RawValue::NULL.to_owned())
    }

    /// `text`, checked to be JSON.
    pub fn from_text(text: String) -> serde_json::Result<Json> {
        RawValue::from_string(text).map(Json)
    }

    /// The text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Reads the text as a `T` (only the fields `T` names are kept).
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> serde_json::Result<T> {
        serde_json::from_str(self.get())
    }

    /// The text as a tree of values.
    pub fn to_value(&self) -> Value {
        // Checked to be JSON when made.
        self.parse().unwrap_or(Value::Null)
    }
}

/// Same text: two renderings of equal values made the same way compare equal.
impl PartialEq for Json {
    fn eq(&self, other: &Json) -> bool {
        self.get() == other.get()
    }
}

/// The few fields of an event's data that the daemon itself reads; the
/// rest of the text is skipped over.
#[derive(Deserialize)]
struct DataFields<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    status: Option<Cow<'a, str>>,
    /// Present and not `null`.
    #[serde(default)]
    handler: Option<serde::de::IgnoredAny>,
}

impl Event {
    fn fields(&self) -> Option<DataFields<'_>> {
        self.data.parse().ok()
    }

    /// The `id` of the resource its data carries, if it has one.
    pub fn resource_id(&self) -> Option<Cow<'_, str>> {
        self.fields()?.id
    }

    /// Whether the action its data carries is run by a handler (`false`
    /// when the data is not an action).
    pub fn names_a_handler(&self) -> bool {
        // Without the key anywhere in the text (a decision-only action
        // leaves it out) there is nothing to read. A quote inside a string
        // is escaped, so the text of a string value cannot match.
        if memchr::memmem::find(self.data.get().as_bytes(), br#""handler":"#).is_none() {
            return false;
        }
        self.fields().is_some_and(|d| d.handler.is_some())
    }

    /// For an event that carries its action as it stood after the change:
    /// whether that left the action settled. `None` for other events.
    /// Reads only the fields that decide it.
    pub fn settles_its_action(&self) -> Option<bool> {
        if !self.kind.starts_with("action.") {
            return None;
        }
        let d = self.fields()?;
        if d.id.as_deref()? != self.action_id.as_deref()? {
            return None;
        }
        let status: ActionStatus = d.status?.parse().ok()?;
        Some(status.is_settled(d.handler.is_some()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn event(kind: &str, action_id: Option<&str>, data: &str) -> Event {
        Event {
            seq: 1,
            id: "e".into(),
            kind: kind.into(),
            at: Utc::now(),
            agent: None,
            action_id: action_id.map(str::to_owned),
            grant_id: None,
            data: Json::from_text(data.to_owned()).unwrap(),
        }
    }

    #[test]
    fn event_data_is_kept_as_its_text_and_read_field_by_field() {
        let ev = event(
            "action.approved",
            Some("a\"1"),
            r#"{"id":"a\"1","status":"approved","handler":"h","x":[1,{"y":2}]}"#,
        );
        assert_eq!(ev.resource_id().as_deref(), Some("a\"1"));
        assert!(ev.names_a_handler());
        // Approved is not settled for a handler action.
        assert_eq!(ev.settles_its_action(), Some(false));
        assert_eq!(
            serde_json::to_string(&ev.data).unwrap(),
            r#"{"id":"a\"1","status":"approved","handler":"h","x":[1,{"y":2}]}"#
        );
        assert_eq!(ev.data.to_value()["x"][1]["y"], 2);

        let decision_only = event(
            "action.approved",
            Some("a2"),
            r#"{"id":"a2","status":"approved","handler":null}"#,
        );
        assert!(!decision_only.names_a_handler());
        assert_eq!(decision_only.settles_its_action(), Some(true));

        // Another action's data, or data that is no action, settles nothing.
        assert_eq!(
            event(
                "action.approved",
                Some("a3"),
                r#"{"id":"a2","status":"denied"}"#
            )
            .settles_its_action(),
            None
        );
        assert_eq!(
            event("grant.created", None, r#"{"id":"g1"}"#).settles_its_action(),
            None
        );
        // The key only inside a string or a nested object: no handler.
        let nested = event(
            "action.approved",
            Some("a4"),
            r#"{"id":"a4","detail":"\"handler\":\"x\"","params":{"handler":"y"}}"#,
        );
        assert!(!nested.names_a_handler());
        assert!(Json::from_text("{".into()).is_err());
        assert_eq!(Json::null().get(), "null");
    }
}

/// One delivery attempt, as shown on the action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ActionAttempt {
    /// Attempt number, from 1.
    pub n: i64,
    /// When it started.
    pub at: DateTime<Utc>,
    /// The executor's HTTP status, when it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    /// What went wrong, when something did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long it took.
    pub duration_ms: i64,
}
