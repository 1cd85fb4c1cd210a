//! Bodies of `/v1/actions`: requesting an action and deciding on it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A decision-only request: the agent runs the tool itself once allowed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolActionRequest {
    /// Tool name, e.g. `bash`; 1-128 of `A-Z a-z 0-9 _ - .`.
    #[schema(
        pattern = r"^[A-Za-z0-9_.\-]{1,128}$",
        min_length = 1,
        max_length = 128
    )]
    pub tool: String,
    /// Tool-specific detail, e.g. the command line.
    #[schema(max_length = 65536)]
    pub detail: String,
    /// Why the agent wants to do it (shown to the human).
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
    /// How long a human has to decide if the policy asks one, e.g. `5m`.
    /// Bounds and default are configured (`actions.min_timeout`,
    /// `max_timeout`, `default_timeout`); the pattern spells the default
    /// bounds, 1m-60m, in seconds, minutes or hours. The server also takes
    /// other spellings of a duration within the configured bounds (`1h 0m`).
    #[serde(default)]
    #[schema(
        pattern = r"^(?:(?:[1-9]|[1-5][0-9]|60)m|1h|(?:6[0-9]|[7-9][0-9]|[1-9][0-9]{2}|[12][0-9]{3}|3[0-5][0-9]{2}|3600)s)$"
    )]
    pub timeout: Option<String>,
    /// Makes retries safe: the same key and body return the first action.
    #[serde(default)]
    #[schema(max_length = 256)]
    pub idempotency_key: Option<String>,
    /// The session (task) it belongs to, as the agent runtime names it:
    /// 1-200 printable characters. Session grants and plans apply within
    /// it; reading untrusted content taints it (see docs/sessions.md).
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}](?:[^\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}]{0,198}[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}])?$"
    )]
    pub session: Option<String>,
    /// The agent runtime sending it, a short slug such as `claude-code`,
    /// `cursor`, `gemini-cli` (1-64 of `a-z 0-9 - _ .`).
    #[serde(default)]
    #[schema(pattern = r"^[a-z0-9][a-z0-9_.\-]{0,63}$")]
    pub runtime: Option<String>,
    /// The tool call's input as its runtime sent it (a file write's
    /// content, an edit's old and new text), shown to the humans who
    /// decide; no pattern, grant or plan reads it (the policy matches only
    /// `tool` and `detail`). A JSON object, bounded as a handler action's
    /// params (`limits.params_max_bytes`, 64 levels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub params: Option<serde_json::Value>,
    /// Why the caller cannot vouch that the call does only what `tool` and
    /// `detail` say (a hook whose runtime rewrites a path, or whose shell
    /// may read the line otherwise). A human decides it then, whatever
    /// rule or grant would allow it; a deny stays a deny. Shown in the
    /// decision's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 500)]
    pub caution: Option<String>,
}

/// A request for an action a registered handler performs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HandlerActionRequest {
    /// Handler id.
    pub handler: String,
    /// Action name.
    pub action: String,
    /// Params, validated against the action's `params_schema`.
    #[schema(value_type = Object)]
    pub params: serde_json::Value,
    /// Why the agent wants to do it.
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
    /// How long a human has to decide if the policy asks one, e.g. `5m`;
    /// bounds and default as for a decision-only action (the pattern
    /// spells the default bounds, 1m-60m).
    #[serde(default)]
    #[schema(
        pattern = r"^(?:(?:[1-9]|[1-5][0-9]|60)m|1h|(?:6[0-9]|[7-9][0-9]|[1-9][0-9]{2}|[12][0-9]{3}|3[0-5][0-9]{2}|3600)s)$"
    )]
    pub timeout: Option<String>,
    /// Makes retries safe.
    #[serde(default)]
    #[schema(max_length = 256)]
    pub idempotency_key: Option<String>,
    /// The session (task) it belongs to, as the agent runtime names it:
    /// 1-200 printable characters. Session grants and plans apply within
    /// it; reading untrusted content taints it (see docs/sessions.md).
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}](?:[^\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}]{0,198}[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}])?$"
    )]
    pub session: Option<String>,
    /// The agent runtime sending it, a short slug such as `claude-code`,
    /// `cursor`, `gemini-cli` (1-64 of `a-z 0-9 - _ .`).
    #[serde(default)]
    #[schema(pattern = r"^[a-z0-9][a-z0-9_.\-]{0,63}$")]
    pub runtime: Option<String>,
}

/// Either a handler action or a decision-only action.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum CreateAction {
    /// `{handler, action, params, …}`.
    Handler(HandlerActionRequest),
    /// `{tool, detail, …}`.
    Tool(ToolActionRequest),
}

impl CreateAction {
    /// `(session, runtime)` of either form.
    pub fn origin(&self) -> (Option<&str>, Option<&str>) {
        match self {
            CreateAction::Handler(h) => (h.session.as_deref(), h.runtime.as_deref()),
            CreateAction::Tool(t) => (t.session.as_deref(), t.runtime.as_deref()),
        }
    }

    /// `(reason, timeout, idempotency_key)` of either form.
    pub fn common(&self) -> (Option<&str>, Option<&str>, Option<&str>) {
        match self {
            CreateAction::Handler(h) => (
                h.reason.as_deref(),
                h.timeout.as_deref(),
                h.idempotency_key.as_deref(),
            ),
            CreateAction::Tool(t) => (
                t.reason.as_deref(),
                t.timeout.as_deref(),
                t.idempotency_key.as_deref(),
            ),
        }
    }
}

/// Body of an approval.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveBody {
    /// A note kept with the decision.
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub note: Option<String>,
    /// Also grant a standing permission (the "don't ask again" of the gear icon).
    #[serde(default)]
    pub remember: Option<Remember>,
    /// Handler actions: the params to run instead of those asked (checked
    /// against the action's params schema).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub params: Option<serde_json::Value>,
    /// Decision-only actions: the detail to run instead of the one asked
    /// (it must itself pass the profile without being denied).
    #[serde(default)]
    #[schema(max_length = 65536)]
    pub detail: Option<String>,
    /// Which version of the action the approver read: as its agent `asked`
    /// it (the default), or as another approver `edited` it. An approval
    /// is refused (409, still pending) when the action is otherwise by the
    /// time it lands, so it never approves a version its approver did
    /// not read: approving an edited action takes `"seen": "edited"`.
    #[serde(default)]
    pub seen: Option<crate::teams::Seen>,
}

/// A grant made while approving.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Remember {
    /// `1h`, `30m`, `2d`, `today`, `indefinite` or an RFC 3339 time.
    #[schema(
        pattern = r"^(?:[1-9][0-9]{0,3}[smhdw]|today|indefinite|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2}))$"
    )]
    pub expires: String,
    /// Handler actions: the scope granted (default: this action's scope); values may be globs.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub scope: Option<serde_json::Map<String, serde_json::Value>>,
    /// Decision-only actions: full-match pattern over the detail (default: exactly this detail).
    #[serde(default)]
    #[schema(format = Regex)]
    pub pattern: Option<String>,
    /// The agent it is for: default this action's agent; `*` for any agent.
    #[serde(default)]
    pub agent: Option<String>,
    /// Only within this session ("for this task"); void once it ends.
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}](?:[^\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}]{0,198}[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}])?$"
    )]
    pub session: Option<String>,
    /// Void after this many allowed actions ("for the next N"), 1-10000.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10000)]
    pub uses: Option<i64>,
}

/// Body of a denial.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DenyBody {
    /// Why it was denied (the agent sees it).
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
}

/// Body of a free-text reply.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyBody {
    /// yes/approve/ok/continue or no/reject/stop/cancel, in any case,
    /// with surrounding whitespace and ASCII punctuation ignored (`"Yes!"`).
    #[schema(
        max_length = 256,
        pattern = r"^[\t\n\r !-/:-@\[-`{-~]*(?:[Yy][Ee][Ss]|[Aa][Pp][Pp][Rr][Oo][Vv][Ee]|[Oo][Kk]|[Cc][Oo][Nn][Tt][Ii][Nn][Uu][Ee]|[Nn][Oo]|[Rr][Ee][Jj][Ee][Cc][Tt]|[Ss][Tt][Oo][Pp]|[Cc][Aa][Nn][Cc][Ee][Ll])[\t\n\r !-/:-@\[-`{-~]*$"
    )]
    pub text: String,
}

/// What the agent reports after running an approved decision-only action.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OutcomeBody {
    /// How it went.
    pub status: OutcomeStatus,
    /// Any result payload (any JSON value).
    #[serde(default)]
    pub result: Option<serde_json::Value>,
    /// Error text when it failed.
    #[serde(default)]
    #[schema(max_length = 65536)]
    pub error: Option<String>,
}

/// How an approved action went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutcomeStatus {
    /// It ran and succeeded.
    Completed,
    /// It ran and failed, or could not run.
    Failed,
}

/// Which end of a listing comes first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ListOrder {
    /// The newest first (the default).
    #[default]
    Newest,
    /// The oldest first: of pending actions, the longest waiting.
    Oldest,
}
