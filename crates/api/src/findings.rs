//! What the analyser found an action may do (the page's risk badge).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One thing an action may do, as the policy's analyser reads its command
/// (or, for other tools, its tool and handler names).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Finding {
    /// Removes data (`rm`, `git reset --hard`, `DROP TABLE`, a delete).
    Deletes,
    /// Writes files or changes state (`mv`, `> file`, `git commit`).
    Writes,
    /// Talks to the network (`curl`, `git push`, `/dev/tcp`, a send).
    Network,
    /// Runs other commands (`bash -c`, `xargs`, `$(…)`).
    RunsCommands,
    /// Parts could not be analysed: it may do more than listed.
    Unclear,
}
