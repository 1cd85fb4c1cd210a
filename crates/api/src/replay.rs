//! Wire types of the what-if replay of a candidate profile
//! (`POST /v1/agents/{id}/profile/replay`, `docs/profiles.md`).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A candidate profile to replay over an agent's recorded actions.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayBody {
    /// The candidate: a preset name or `{allow, ask, deny}`, as for
    /// `PUT /v1/agents/{id}`.
    #[schema(value_type = Object)]
    pub profile: Value,
    /// How far back: an RFC 3339 time, or a duration back from now such as
    /// `30d`, `12h`, `90m` (default `30d`).
    #[serde(default)]
    pub since: Option<String>,
}

/// Decisions that would change from one outcome to another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReplayGroup {
    /// What was decided (`allow`, `ask`, `deny`).
    pub from: String,
    /// What the candidate decides.
    pub to: String,
    /// How many recorded actions.
    pub count: u64,
    /// A few of them (at most 5), newest first.
    pub examples: Vec<ReplayExample>,
}

/// One recorded action whose decision would change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReplayExample {
    /// The action's id.
    pub id: String,
    /// Its action string as the API shows it (sensitive values masked),
    /// cut to 200 characters.
    pub action_string: String,
    /// When it was requested (RFC 3339).
    pub created_at: String,
}

/// What a candidate profile would have changed; nothing is stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReplayReport {
    /// The agent.
    pub agent: String,
    /// The start of the replayed history (RFC 3339).
    pub since: String,
    /// How many recorded actions were replayed.
    pub replayed: u64,
    /// How many would be decided otherwise.
    pub changed: u64,
    /// The changes by old -> new outcome, largest first.
    pub groups: Vec<ReplayGroup>,
    /// One line: "37 asked would now be allowed; 2 allowed would now be denied".
    pub summary: String,
}
