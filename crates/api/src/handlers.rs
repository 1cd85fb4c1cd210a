//! What an executor registers: a handler, the permissions it declares and
//! the actions it performs, with the templates that render them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A permission a handler declares.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionDecl {
    /// Name, e.g. `email.send`.
    pub name: String,
    /// What it permits.
    #[serde(default)]
    pub description: Option<String>,
    /// JSON Schema of its scope keys (an object schema with `properties`).
    #[schema(value_type = Object)]
    pub parameters_schema: Value,
}

/// One labelled field of a rendered action.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenderField {
    /// Label shown to the human.
    pub label: String,
    /// Template of the value.
    pub value: String,
}

/// How the handler wants its actions shown to a human.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Render {
    /// Title template.
    pub title: String,
    /// Summary template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Labelled field templates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<RenderField>,
}

/// An action a handler performs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionDecl {
    /// Name, e.g. `send`.
    pub name: String,
    /// What it does (shown to agents as the tool description).
    #[serde(default)]
    pub description: Option<String>,
    /// JSON Schema of its params.
    #[schema(value_type = Object)]
    pub params_schema: Value,
    /// The permission it needs.
    pub permission: String,
    /// Scope key -> JSON pointer into the params.
    #[serde(default)]
    pub scope: BTreeMap<String, String>,
    /// Template of the action string's detail (default: the action name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Display templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render: Option<Render>,
    /// JSON pointers of params masked as `"***"` wherever shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sensitive: Vec<String>,
    /// What the action does, as hints for agents (the MCP tool annotations
    /// `readOnlyHint`, `destructiveHint`, ...). Hints only: the policy never
    /// reads them, so they never make anything allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hints: Option<ActionHints>,
    /// Approvals this action needs when it is asked, beside any rule of
    /// the agent's profile (`docs/teams.md`): the larger count applies and
    /// an approver must pass both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<ActionApprovals>,
}

/// A handler action's approvals: a profile's approvals rule without the
/// pattern (it is the action).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionApprovals {
    /// Approvals from distinct people (1-10, default 1); above 1, only
    /// people count (`POST /v1/people`): a key or chat identity that is
    /// nobody's gets 403.
    #[serde(default = "one")]
    pub count: u32,
    /// Who may decide: globs over people's and operator keys' names, or
    /// `group:<name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// Escalate after this long without a decision (`30m`, `2h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_after: Option<String>,
    /// The group told on escalation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_to: Option<String>,
}

fn one() -> u32 {
    1
}

/// Hints a handler declares about one of its actions, shown to agents as
/// the MCP tool annotations of the same names. An absent hint is unknown
/// (MCP's defaults then apply: not read-only, destructive, not idempotent,
/// open world).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionHints {
    /// It does not change anything (`readOnlyHint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// What it changes may be destroyed or overwritten (`destructiveHint`;
    /// meaningful when not read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// Doing it twice with the same params does no more than once
    /// (`idempotentHint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// It reaches beyond the executor's own closed domain, e.g. the web or
    /// other people (`openWorldHint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

impl ActionHints {
    /// Whether the action may reach past its handler's own closed domain
    /// (the web, other people): unless `open_world` is declared `false`,
    /// as MCP's default for an absent hint says. A handler action that
    /// may is a way out of a tainted session (docs/sessions.md).
    pub fn reaches_out(hints: Option<&ActionHints>) -> bool {
        hints.and_then(|h| h.open_world) != Some(false)
    }

    /// Whether what the action answers is a stranger's words: it is
    /// declared to read (`read_only: true`) and reaches out (a web page, a
    /// mailbox, a ticket). Its result goes back to the agent, so letting it
    /// run taints its session (docs/sessions.md), as an MCP tool's call
    /// does. An absent `read_only` is MCP's default, not read-only: an
    /// action that changes things, whose answer is its own report (were
    /// those to taint, every unhinted handler would ask from its second
    /// use in a session on).
    pub fn reads_world(hints: Option<&ActionHints>) -> bool {
        Self::reaches_out(hints) && hints.and_then(|h| h.read_only) == Some(true)
    }
}

/// What an executor registers.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HandlerRegistration {
    /// Slug id: lowercase letters, digits, `_` and `-`, 1-64, starting with a letter or digit.
    pub id: String,
    /// Display name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: Option<String>,
    /// Webhook URL (http or https).
    pub url: String,
    /// Per-attempt timeout, e.g. `30s` (default set by the daemon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Permissions it declares.
    #[serde(default)]
    pub permissions: Vec<PermissionDecl>,
    /// Actions it performs.
    pub actions: Vec<ActionDecl>,
}

/// The tool name of a handler action: `<handler>__<action>`, with characters
/// outside `[A-Za-z0-9_-]` replaced so every dialect (OpenAI, Anthropic,
/// MCP) accepts it; at most 64 characters.
pub fn tool_name(handler: &str, action: &str) -> String {
    format!("{handler}__{action}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}
