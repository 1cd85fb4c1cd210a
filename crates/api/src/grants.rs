//! Bodies of `/v1/grants`, `/v1/permissions/check` and `/v1/grant-requests`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// An agent's request for a permission.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateGrantRequest {
    /// Handler id.
    pub handler: String,
    /// Permission name.
    pub permission: String,
    /// Scope asked for.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub scope: Map<String, Value>,
    /// Why the agent needs it.
    pub reason: String,
    /// How long the grant should last (`1h`, `today`, `indefinite`, RFC 3339; default 1h).
    #[serde(default)]
    #[schema(
        pattern = r"^(?:[1-9][0-9]{0,3}[smhdw]|today|indefinite|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2}))$"
    )]
    pub expires: Option<String>,
    /// How long a human has to answer (default and bounds as for actions).
    #[serde(default)]
    #[schema(
        pattern = r"^(?:(?:[1-9]|[1-5][0-9]|60)m|1h|(?:6[0-9]|[7-9][0-9]|[1-9][0-9]{2}|[12][0-9]{3}|3[0-5][0-9]{2}|3600)s)$"
    )]
    pub timeout: Option<String>,
    /// Limit the grant to this session of the agent's (void when it ends).
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}](?:[^\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}]{0,198}[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}])?$"
    )]
    pub session: Option<String>,
    /// Limit the grant to this many allowed actions.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10000)]
    pub uses: Option<i64>,
    /// Makes a retry safe: the same key from the same agent with the same
    /// body answers the request made the first time (200), asking no human
    /// twice; with another body it is a 409.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    pub idempotency_key: Option<String>,
}

/// An approval, optionally narrower than asked.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveRequest {
    /// A scope within the one asked for (default: as asked).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub scope: Option<Map<String, Value>>,
    /// An expiry no later than the one asked for (default: as asked).
    #[serde(default)]
    #[schema(
        pattern = r"^(?:[1-9][0-9]{0,3}[smhdw]|today|indefinite|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2}))$"
    )]
    pub expires: Option<String>,
}

/// A denial.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DenyRequest {
    /// Why (the agent sees it).
    #[serde(default)]
    pub reason: Option<String>,
}

/// A grant of a handler's permission within a scope.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionGrant {
    /// For this agent only; absent: any agent.
    #[serde(default)]
    #[schema(pattern = r"^[A-Za-z0-9_.@\-]{1,128}$")]
    pub agent: Option<String>,
    /// Handler id.
    pub handler: String,
    /// Permission name.
    pub permission: String,
    /// Scope values; a string with `*` or `?` is a glob; a missing key matches any value.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub scope: Map<String, Value>,
    /// `1h`, `30m`, `2d`, `today`, `indefinite`; the server also takes an RFC 3339 time.
    #[schema(
        pattern = r"^(?:[1-9][0-9]{0,3}[smhdw]|today|indefinite|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2}))$"
    )]
    pub expires: String,
    /// A note.
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub note: Option<String>,
    /// Only within this session (the task's session id); void once it ends.
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}](?:[^\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}]{0,198}[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}])?$"
    )]
    pub session: Option<String>,
    /// Void after this many allowed actions (1-10000), each taken in the
    /// transaction that allows it.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10000)]
    pub uses: Option<i64>,
    /// Makes a retry safe: the same key from the same operator with the
    /// same body answers the grant made the first time (200) and changes
    /// nothing; with another body it is a 409.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    pub idempotency_key: Option<String>,
}

/// A grant for decision-only actions of a tool whose detail matches a pattern.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolGrant {
    /// For this agent only; absent: any agent.
    #[serde(default)]
    #[schema(pattern = r"^[A-Za-z0-9_.@\-]{1,128}$")]
    pub agent: Option<String>,
    /// Tool name.
    #[schema(pattern = r"^[A-Za-z0-9_.\-]{1,128}$")]
    pub tool: String,
    /// Full-match regex over the detail, shell-aware for shell tools (the
    /// Rust `regex` syntax, plus look-around; an invalid one is a 422).
    #[schema(format = Regex, max_length = 4096)]
    pub pattern: String,
    /// `1h`, `30m`, `2d`, `today`, `indefinite`; the server also takes an RFC 3339 time.
    #[schema(
        pattern = r"^(?:[1-9][0-9]{0,3}[smhdw]|today|indefinite|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2}))$"
    )]
    pub expires: String,
    /// A note.
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub note: Option<String>,
    /// Only within this session (the task's session id); void once it ends.
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}](?:[^\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}]{0,198}[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}])?$"
    )]
    pub session: Option<String>,
    /// Void after this many allowed actions (1-10000), each taken in the
    /// transaction that allows it.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10000)]
    pub uses: Option<i64>,
    /// Makes a retry safe: the same key from the same operator with the
    /// same body answers the grant made the first time (200) and changes
    /// nothing; with another body it is a 409.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    pub idempotency_key: Option<String>,
}

/// A grant to create: `{handler, permission, scope}` or `{tool, pattern}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum CreateGrant {
    /// A handler permission.
    Permission(PermissionGrant),
    /// A decision-only tool pattern.
    Tool(ToolGrant),
}

impl CreateGrant {
    /// The operator's idempotency key, if any.
    pub fn idempotency_key(&self) -> Option<&str> {
        match self {
            CreateGrant::Permission(g) => g.idempotency_key.as_deref(),
            CreateGrant::Tool(g) => g.idempotency_key.as_deref(),
        }
    }
}

/// Does the calling agent hold this permission for this scope?
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionCheck {
    /// Handler id.
    pub handler: String,
    /// Permission name.
    pub permission: String,
    /// Scope values of the intended action.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub scope: Map<String, Value>,
}
