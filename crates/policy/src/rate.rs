//! Rate limits a profile sets: `max_per_hour` over every action its allow
//! patterns allow for the agent, and `rule_limits` per allow pattern. Past a
//! limit an action that would be allowed is asked (never silently allowed
//! or dropped); the counting is the store's, so it holds across requests
//! and daemons. This module only says which limits apply to a decision.

use serde::{Deserialize, Serialize};

use crate::decide::{Decision, Rule};
use crate::profile::{CustomProfile, Profile, ProfileSpec};
use crate::verdict::{ListKind, Verdict};

/// At most `max_per_hour` actions an hour allowed by the allow pattern
/// `pattern` (written exactly as in the profile's `allow` list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleLimit {
    /// One of the profile's allow patterns, as written.
    pub pattern: String,
    /// At least 1.
    pub max_per_hour: u32,
}

/// A limit that applies to a decision: its counter's key and its maximum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedLimit {
    /// `agent`, or `rule:<pattern>`.
    pub key: String,
    /// Actions an hour.
    pub max_per_hour: u32,
    /// For a reason: "the agent's max_per_hour" or "max_per_hour of rule `...`".
    pub what: String,
}

/// The field errors of a profile's limits: a `max_per_hour` of 0, a rule
/// limit naming no allow pattern of the profile.
pub fn limit_errors(c: &CustomProfile) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if c.max_per_hour == Some(0) {
        out.push(("max_per_hour".to_owned(), "at least 1".to_owned()));
    }
    for (i, r) in c.rule_limits.iter().enumerate() {
        if !c.allow.contains(&r.pattern) {
            out.push((
                format!("rule_limits[{i}].pattern"),
                format!("`{}` is not one of the allow patterns", r.pattern),
            ));
        }
        if r.max_per_hour == 0 {
            out.push((
                format!("rule_limits[{i}].max_per_hour"),
                "at least 1".to_owned(),
            ));
        }
    }
    out
}

/// The limits `decision` (made under `profile`) counts against: none
/// unless an allow pattern allowed it (grants are not limited).
pub fn limits_for(profile: &Profile, decision: &Decision) -> Vec<AppliedLimit> {
    let ProfileSpec::Custom(c) = profile.spec() else {
        return Vec::new();
    };
    let Some(Rule::Pattern {
        list: ListKind::Allow,
        pattern,
        ..
    }) = &decision.rule
    else {
        return Vec::new();
    };
    if decision.verdict != Verdict::Allow {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(n) = c.max_per_hour {
        out.push(AppliedLimit {
            key: "agent".to_owned(),
            max_per_hour: n,
            what: "the agent's max_per_hour".to_owned(),
        });
    }
    for r in c.rule_limits.iter().filter(|r| &r.pattern == pattern) {
        out.push(AppliedLimit {
            key: format!("rule:{pattern}"),
            max_per_hour: r.max_per_hour,
            what: format!("max_per_hour of rule `{pattern}`"),
        });
    }
    out
}
