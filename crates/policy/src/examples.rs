//! Profile examples: action strings a profile's author says it allows, asks
//! or denies (`examples: {allow: [...], ask: [...], deny: [...]}`), checked
//! when the profile is set, so a profile means what its author thinks it
//! means. Each preset ships with its own ([`preset_examples`]).

use serde::{Deserialize, Serialize};

use crate::decide::check;
use crate::profile::{Profile, ProfileSpec, split_action};
use crate::verdict::Verdict;

/// Action strings (`tool:<tool>:<detail>`) and the answer each must get.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Examples {
    /// Must be allowed.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Must go to a human.
    #[serde(default)]
    pub ask: Vec<String>,
    /// Must be denied.
    #[serde(default)]
    pub deny: Vec<String>,
}

impl Examples {
    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.ask.is_empty() && self.deny.is_empty()
    }

    fn lists(&self) -> [(&'static str, Verdict, &[String]); 3] {
        [
            ("allow", Verdict::Allow, &self.allow),
            ("ask", Verdict::Ask, &self.ask),
            ("deny", Verdict::Deny, &self.deny),
        ]
    }
}

/// An example the profile answers otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExampleMismatch {
    /// `examples.allow[2]`.
    pub field: String,
    /// The example as written.
    pub example: String,
    /// What it should get (`allow`, `ask`, `deny`).
    pub expected: &'static str,
    /// What it gets; `None` when it is not an action string.
    pub actual: Option<&'static str>,
}

impl std::fmt::Display for ExampleMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.actual {
            Some(actual) => write!(
                f,
                "`{}` should be {} but the profile answers {}",
                self.example,
                past(self.expected),
                past(actual)
            ),
            None => write!(
                f,
                "`{}` is not an action string tool:<tool>:<detail>",
                self.example
            ),
        }
    }
}

fn word(v: Verdict) -> &'static str {
    match v {
        Verdict::Allow => "allow",
        Verdict::Ask => "ask",
        Verdict::Deny => "deny",
    }
}

fn past(w: &str) -> &'static str {
    match w {
        "allow" => "allowed",
        "ask" => "asked",
        _ => "denied",
    }
}

/// The examples a profile carries: its own, or its preset's.
pub fn examples_of(profile: &Profile) -> Examples {
    match profile.spec() {
        ProfileSpec::Preset(name) => preset_examples(name),
        ProfileSpec::Custom(c) => c.examples.clone(),
    }
}

/// Every example of `profile` that gets another answer than written (all
/// of them, in list order), as [`check`] decides without grants.
pub fn mismatches(profile: &Profile) -> Vec<ExampleMismatch> {
    let examples = examples_of(profile);
    let mut out = Vec::new();
    for (list, want, items) in examples.lists() {
        for (i, example) in items.iter().enumerate() {
            let actual = split_action(example).map(|_| word(check(example, profile)));
            if actual != Some(word(want)) {
                out.push(ExampleMismatch {
                    field: format!("examples.{list}[{i}]"),
                    example: example.clone(),
                    expected: word(want),
                    actual,
                });
            }
        }
    }
    out
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// What each preset is meant to answer: a few actions per list.
pub fn preset_examples(name: &str) -> Examples {
    let (allow, ask, deny): (&[&str], &[&str], &[&str]) = match name {
        "open" => (
            &[
                "tool:bash:rm -rf build",
                "tool:git:push origin main",
                "tool:fs:write_file notes.txt",
            ],
            &[],
            &[],
        ),
        "standard" => (
            &[
                "tool:file:view src/main.rs",
                "tool:file:edit src/main.rs",
                "tool:git:status",
                "tool:fs:read_file README.md",
            ],
            &[
                "tool:bash:ls",
                "tool:git:push origin main",
                "tool:file:edit .git/config",
                "tool:file:write ~/.bashrc",
                "tool:fs:write_file notes.txt",
            ],
            &["tool:WebFetch:https://example.com"],
        ),
        "locked" => (
            &["tool:file:view src/main.rs"],
            &[],
            &[
                "tool:bash:ls",
                "tool:file:edit src/main.rs",
                "tool:git:status",
            ],
        ),
        "guarded" => (
            &[],
            &[
                "tool:bash:ls",
                "tool:file:view src/main.rs",
                "tool:git:status",
            ],
            &[],
        ),
        "readonly" => (
            &[
                "tool:Read:src/main.rs",
                "tool:bash:ls -la",
                "tool:bash:git status",
                "tool:fs:read_file README.md",
            ],
            &[
                "tool:bash:rm -rf build",
                "tool:bash:ls > out.txt",
                "tool:WebFetch:https://example.com",
                "tool:fs:write_file notes.txt",
            ],
            &[],
        ),
        _ => (&[], &[], &[]),
    };
    Examples {
        allow: owned(allow),
        ask: owned(ask),
        deny: owned(deny),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::profile::CustomProfile;
    use crate::{get_preset, preset_names};

    #[test]
    fn every_preset_passes_its_own_examples() {
        for name in preset_names() {
            let p = get_preset(name).unwrap();
            let ex = examples_of(&p);
            assert!(!ex.is_empty(), "{name} ships no examples");
            assert_eq!(mismatches(&p), vec![], "{name}");
        }
    }

    #[test]
    fn every_mismatch_is_named_with_what_it_gets() {
        let p = Profile::custom(CustomProfile {
            allow: vec!["tool:git:status".into()],
            ask: vec!["tool:git:.*".into()],
            examples: Examples {
                allow: vec!["tool:git:status".into(), "tool:git:push".into()],
                ask: vec!["tool:bash:ls".into()],
                deny: vec!["nonsense".into()],
            },
            ..CustomProfile::default()
        })
        .unwrap();
        let m = mismatches(&p);
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!(m[0].field, "examples.allow[1]");
        assert_eq!(m[0].actual, Some("ask"));
        assert_eq!(m[1].field, "examples.ask[0]");
        assert_eq!(m[1].actual, Some("deny"));
        assert_eq!(m[2].field, "examples.deny[0]");
        assert_eq!(m[2].actual, None);
        assert!(
            m[0].to_string()
                .contains("should be allowed but the profile answers asked")
        );
    }
}
