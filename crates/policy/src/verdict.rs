//! The three answers a policy can give, and the three lists that produce them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What the policy says about an action.
///
/// Ordered by strictness (`Allow < Ask < Deny`), so the strictest of several
/// answers is simply their maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Proceed without asking anyone.
    Allow,
    /// Queue the action for a human to decide.
    Ask,
    /// Refuse the action.
    Deny,
}

impl Verdict {
    /// The lowercase name used on the wire (`"allow"`, `"ask"`, `"deny"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One of the three pattern lists of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListKind {
    /// Patterns that allow an action.
    Allow,
    /// Patterns that send an action to a human.
    Ask,
    /// Patterns that refuse an action; nothing overrides them.
    Deny,
}

impl ListKind {
    /// The lowercase name of the list (`"allow"`, `"ask"`, `"deny"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

impl fmt::Display for ListKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strictness_orders_allow_ask_deny() {
        assert!(Verdict::Allow < Verdict::Ask && Verdict::Ask < Verdict::Deny);
        assert_eq!(Verdict::Allow.max(Verdict::Deny), Verdict::Deny);
    }

    #[test]
    fn verdict_serializes_lowercase() {
        assert_eq!(
            serde_json::to_string(&Verdict::Ask).ok().as_deref(),
            Some("\"ask\"")
        );
        assert_eq!(Verdict::Deny.to_string(), "deny");
        assert_eq!(
            serde_json::to_string(&ListKind::Allow).ok().as_deref(),
            Some("\"allow\"")
        );
    }
}
