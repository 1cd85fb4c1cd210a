//! Wire types of approvals for teams (`docs/teams.md`): people, the
//! approvals an action collected, edits made before approving, and the
//! body of an approval that edits.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A person: a name, groups, the operator keys they use and their chat
/// identities. A decision made through any of them is theirs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Person {
    /// Time-ordered id, `per_…`.
    pub id: String,
    /// Unique name (approver rules match it: `release-*`).
    pub name: String,
    /// Groups (approver rules name them: `group:dba`).
    pub groups: Vec<String>,
    /// Ids of the operator keys this person decides with.
    pub keys: Vec<String>,
    /// Chat identities.
    pub chat: ChatIds,
    /// When it was created.
    #[serde(serialize_with = "crate::rfc3339::serialize")]
    pub created_at: DateTime<Utc>,
    /// When it was last changed.
    #[serde(serialize_with = "crate::rfc3339::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// A person's chat identities; each belongs to one person at most.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatIds {
    /// Telegram numeric user id, e.g. `"123456789"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telegram: Option<String>,
    /// Slack user id, e.g. `"U012ABCDEF"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<String>,
    /// Discord user id (a snowflake), e.g. `"80351110224678912"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discord: Option<String>,
    /// WhatsApp number, digits only, e.g. `"15551234567"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whatsapp: Option<String>,
}

/// Body of `POST /v1/people` and `PUT /v1/people/{id}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PersonBody {
    /// Unique name: 1-64 of letters, digits, `.`, `_`, `-`, `@`.
    #[schema(pattern = r"^[A-Za-z0-9_.@\-]{1,64}$")]
    pub name: String,
    /// Groups (same characters as names), at most 32.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Operator key ids (`key_…`), at most 32.
    #[serde(default)]
    pub keys: Vec<String>,
    /// Chat identities.
    #[serde(default)]
    pub chat: ChatIds,
}

/// The people, by name.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PeopleList {
    /// Every person.
    pub items: Vec<Person>,
}

/// One approval an action collected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApprovalEntry {
    /// Who: the person's name, or the identity that approved when it is
    /// nobody's (`key:<id>`, `telegram:<user id>`, …).
    pub who: String,
    /// The identity it came through (`key:<id>`, `telegram:<user id>`, …).
    pub by: String,
    /// The channel: api, page, cli, telegram, slack, discord, whatsapp, mcp.
    pub channel: String,
    /// When.
    #[serde(serialize_with = "crate::rfc3339::serialize")]
    pub at: DateTime<Utc>,
}

/// Which version of a pending action an approver read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Seen {
    /// As its agent asked it.
    Asked,
    /// As an earlier approver edited it (`edited: true`).
    Edited,
}

/// What the team did about an action: approvals so far, who decided, an
/// edit. Shown inline in the action.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Team {
    /// Approvals so far, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<ApprovalEntry>,
    /// How many approvals from distinct people it needs: from when it is
    /// asked, by the approvals rules it was asked under (a rule changed
    /// since may raise it at the next approval); absent when none applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals_required: Option<u32>,
    /// The person (or nobody's identity) whose decision settled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_person: Option<String>,
    /// The channel the settling decision came through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_channel: Option<String>,
    /// Whether an approver changed the params or the detail before
    /// approving; `approved_params` or `approved_detail` hold what was
    /// approved, `params` and `detail` what was asked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub edited: bool,
    /// The params approved (sensitive values masked), when edited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub approved_params: Option<Value>,
    /// The detail approved, when edited: the agent runs this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_detail: Option<String>,
    /// A handler action's action string as approved, when edited: its
    /// `approved_params` rendered by the handler's registration at the
    /// edit (what the approvers saw, whatever the registration says later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_action_string: Option<String>,
    /// When it was escalated for want of a decision.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::rfc3339::option"
    )]
    pub escalated_at: Option<DateTime<Utc>>,
}

impl Team {
    /// Whether nothing is recorded (the column stays NULL).
    pub fn is_empty(&self) -> bool {
        *self == Team::default()
    }
}
