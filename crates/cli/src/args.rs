//! The flags of the request/response client commands (see [`super::commands`]).

use clap::{ArgGroup, Args};
use serde_json::Value;

use super::{Common, parse_scope};

/// Flags of `pending`.
#[derive(Debug, Args)]
pub struct PendingArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Only this agent's actions.
    #[arg(long)]
    pub agent: Option<String>,
}

/// Flags of `show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Action id, or a plan's (`pln_…`) or grant request's (`grq_…`).
    pub id: String,
}

/// Flags of `approve`.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Action id.
    pub id: String,
    /// Also grant it from now on until this expiry: `1h`, `30m`, `2d`,
    /// `today`, `indefinite` or an RFC 3339 time.
    #[arg(long, value_name = "EXPIRY")]
    pub remember: Option<String>,
    /// Scope of the remembered grant (handler actions; default: this
    /// action's scope); repeatable; values are JSON if they parse, and a
    /// string with `*` is a glob.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_scope, requires = "remember")]
    pub scope: Vec<(String, Value)>,
    /// Pattern of the remembered grant (decision-only actions; default:
    /// exactly this detail).
    #[arg(long, requires = "remember", conflicts_with = "scope")]
    pub pattern: Option<String>,
    /// Whom the remembered grant is for (default: this action's agent; `*`: any agent).
    #[arg(long, requires = "remember")]
    pub agent: Option<String>,
    /// A note kept with the decision.
    #[arg(long)]
    pub note: Option<String>,
    /// Handler actions: approve these params (a JSON object) instead of
    /// those asked.
    #[arg(long, value_name = "JSON", conflicts_with_all = ["remember", "detail"])]
    pub params: Option<String>,
    /// Decision-only actions: approve this detail instead of the one asked.
    #[arg(long, conflicts_with = "remember")]
    pub detail: Option<String>,
    /// Approve the action as another approver edited it (`[edited]` in
    /// `pending`; read it with `show`). Without it an approval is for the
    /// action as its agent asked it, and is refused (exit 5) once it was
    /// edited.
    #[arg(long, conflicts_with_all = ["remember", "params", "detail"])]
    pub edited: bool,
}

/// Flags of `deny`.
#[derive(Debug, Args)]
pub struct DenyArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Action id.
    pub id: String,
    /// Why (the agent sees it).
    #[arg(long)]
    pub reason: Option<String>,
}

/// Flags of `reply`.
#[derive(Debug, Args)]
pub struct ReplyArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Action id.
    pub id: String,
    /// yes/approve/ok/continue or no/reject/stop/cancel.
    pub text: String,
}

/// Flags of `grant`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("target").required(true).args(["handler", "tool"])))]
pub struct GrantArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Handler id (permission grants).
    #[arg(long, requires = "permission")]
    pub handler: Option<String>,
    /// Permission name (permission grants).
    #[arg(long, requires = "handler")]
    pub permission: Option<String>,
    /// Scope value (permission grants); repeatable; values are JSON if they
    /// parse, and a string with `*` is a glob; a missing key means any value.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_scope, requires = "handler")]
    pub scope: Vec<(String, Value)>,
    /// Tool (decision-only grants).
    #[arg(long, requires = "pattern", conflicts_with = "handler")]
    pub tool: Option<String>,
    /// Full-match pattern over the detail (decision-only grants).
    #[arg(long, requires = "tool")]
    pub pattern: Option<String>,
    /// `1h`, `30m`, `2d`, `today`, `indefinite` or an RFC 3339 time.
    #[arg(long)]
    pub expires: String,
    /// Only for this agent (default: any agent).
    #[arg(long)]
    pub agent: Option<String>,
    /// A note.
    #[arg(long)]
    pub note: Option<String>,
    /// Makes a retry safe: the same key and grant again answer the grant
    /// made the first time (nothing granted twice); another grant under it
    /// is refused.
    #[arg(long)]
    pub idempotency_key: Option<String>,
}

/// Flags of `grants`.
#[derive(Debug, Args)]
pub struct GrantsArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Also list revoked, expired and used-up grants.
    #[arg(long)]
    pub all: bool,
    /// Only grants for this agent.
    #[arg(long)]
    pub agent: Option<String>,
}

/// Flags of `revoke`.
#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Grant id (`grt_…`).
    pub id: String,
}

/// Flags of `request`.
#[derive(Debug, Args)]
pub struct RequestArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Tool name, e.g. `bash`.
    #[arg(long)]
    pub tool: String,
    /// Tool-specific detail, e.g. the command line.
    #[arg(long)]
    pub detail: String,
    /// Seconds to wait for a human when the answer is ask (0: do not wait).
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    pub wait: u64,
    /// Why (shown to the human).
    #[arg(long)]
    pub reason: Option<String>,
    /// How long a human has to decide, e.g. `5m` (default: the daemon's).
    #[arg(long)]
    pub timeout: Option<String>,
    /// Makes retries safe: the same key returns the first action.
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// The task this action belongs to: grants and plans of that session
    /// cover it, and its taint applies (docs/sessions.md).
    #[arg(long, env = "ACTIONGATE_SESSION")]
    pub session: Option<String>,
    /// The runtime sending it (a slug, e.g. `ci`).
    #[arg(long)]
    pub runtime: Option<String>,
}

/// Flags of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Tool name.
    #[arg(long)]
    pub tool: String,
    /// Tool-specific detail.
    #[arg(long)]
    pub detail: String,
    /// A dry run of this profile (a JSON file: `{"allow": [...], ...}` or a
    /// preset name as a JSON string) instead of the key's; needs an admin key.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<std::path::PathBuf>,
    /// Decide it as an action of this session (its grants and taint).
    #[arg(long, env = "ACTIONGATE_SESSION")]
    pub session: Option<String>,
}
