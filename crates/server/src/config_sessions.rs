//! The `[sessions]` settings: how long a session may stay idle before it
//! ends and its grants are revoked (docs/sessions.md).

use serde::{Deserialize, Serialize};

use crate::config_duration::Dur;

/// Sessions (issue 33).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionsSettings {
    /// A session not seen for this long is ended, and its grants revoked;
    /// a plan's grants last at most this long.
    pub idle_timeout: Dur,
}

impl Default for SessionsSettings {
    fn default() -> Self {
        SessionsSettings {
            idle_timeout: Dur::secs(8 * 3600),
        }
    }
}

impl SessionsSettings {
    /// The idle timeout, checked: more than 0s.
    pub fn idle_timeout(&self) -> anyhow::Result<std::time::Duration> {
        if self.idle_timeout.get().is_zero() {
            anyhow::bail!("sessions.idle_timeout: must be more than 0s");
        }
        Ok(self.idle_timeout.get())
    }
}
