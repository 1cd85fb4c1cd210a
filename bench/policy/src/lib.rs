//! Fixtures shared by the benchmarks of `actiongate-policy`: the action
//! strings, the 200-pattern profile, and a Cedar model of the same rules so
//! that the comparison runs the same requests through both engines.
//!
//! The Cedar model mirrors actiongate's cascade with one `PolicySet` per
//! list: if a policy of the deny set permits the request the answer is deny,
//! else one of the allow set gives allow, else one of the ask set gives ask,
//! else deny. The action string travels as the context attribute `action`,
//! and every pattern becomes a `like` condition (`tool:file:.*` is
//! `context.action like "tool:file:*"`). Empty lists get no `PolicySet` and
//! cost no `is_authorized` call, which favours Cedar slightly.

use actiongate_policy::{CustomProfile, Profile, ProfileError, Verdict};
use cedar_policy::{
    Authorizer, Context, ContextCreationError, Decision, Entities, EntityUid, ParseErrors,
    PolicySet, Request, RequestValidationError, RestrictedExpression,
};
use std::fmt::Write as _;
use std::str::FromStr;

/// Lengths, in bytes, of the action strings of the `check_presets` group.
pub const SIZES: [usize; 3] = [50, 500, 5_000];

/// Number of patterns of the large profile.
pub const SVC_PATTERNS: usize = 200;

/// Builds a string of exactly `len` bytes: `prefix` followed by repetitions
/// of `filler`, cut at `len`. A trailing space is replaced by `x` so that
/// shell commands do not end in an empty word.
fn exact_len(prefix: &str, filler: impl Fn(usize) -> String, len: usize) -> String {
    let mut s = prefix.to_owned();
    let mut i = 0;
    while s.len() < len {
        s.push_str(&filler(i));
        i += 1;
    }
    s.truncate(len);
    if s.ends_with(' ') {
        s.pop();
        s.push('x');
    }
    s
}

/// A file action of exactly `len` bytes (at least 40):
/// `tool:file:view /srv/app/src/module_00/module_01/…`.
pub fn file_action(len: usize) -> String {
    exact_len(
        "tool:file:view /srv/app/src/",
        |i| format!("module_{:02}/", i % 100),
        len,
    )
}

/// A file write of exactly `len` bytes (at least 40):
/// `tool:file:write /srv/app/src/module_00/module_01/…`, which `standard`
/// checks for protected path segments.
pub fn write_action(len: usize) -> String {
    exact_len(
        "tool:file:write /srv/app/src/",
        |i| format!("module_{:02}/", i % 100),
        len,
    )
}

/// A git action of exactly `len` bytes (at least 40): `tool:git:log
/// --oneline` followed by plain path arguments, analysed as git's
/// argument list.
pub fn git_action(len: usize) -> String {
    exact_len(
        "tool:git:log --oneline",
        |i| format!(" src/module_{:02}/lib.rs", i % 100),
        len,
    )
}

/// A shell action of exactly `len` bytes (at least 40): `tool:bash:ls -la`
/// followed by plain path arguments, one simple command.
pub fn bash_action(len: usize) -> String {
    exact_len(
        "tool:bash:ls -la",
        |i| format!(" src/module_{:02}/lib.rs", i % 100),
        len,
    )
}

/// The allow patterns `tool:svc000:op.*` … `tool:svc199:op.*`.
pub fn svc_patterns() -> Vec<String> {
    (0..SVC_PATTERNS)
        .map(|i| format!("tool:svc{i:03}:op.*"))
        .collect()
}

/// The 200-pattern profile: every pattern in the allow list, nothing else.
pub fn svc_profile() -> Result<Profile, ProfileError> {
    Profile::custom(CustomProfile {
        allow: svc_patterns(),
        ..CustomProfile::default()
    })
}

/// Requests against the 200-pattern profile, padded to 50 bytes:
/// (name, action). Hits on the last and first pattern, and a miss.
pub fn svc_requests() -> [(&'static str, String); 3] {
    let pad = |tool: &str| {
        exact_len(
            &format!("tool:{tool}:op.read "),
            |i| format!("key={i} "),
            50,
        )
    };
    [
        ("hit_last", pad("svc199")),
        ("hit_first", pad("svc000")),
        ("miss", pad("svc200")),
    ]
}

/// Requests against `standard`, one per answer plus a shell one:
/// (name, action, expected verdict).
pub fn standard_requests() -> [(&'static str, &'static str, Verdict); 4] {
    [
        // Goes through the look-ahead pattern `tool:git:(?!push).*`.
        ("allow_git", "tool:git:commit -m fix-parser", Verdict::Allow),
        ("ask_git_push", "tool:git:push origin main", Verdict::Ask),
        // actiongate parses this as shell; Cedar only sees a string.
        ("ask_bash", "tool:bash:pip install requests", Verdict::Ask),
        ("deny", "tool:self_edit:system_prompt", Verdict::Deny),
    ]
}

/// Shell pipelines judged under `readonly`: (name, action, expected verdict).
pub fn pipelines() -> [(&'static str, &'static str, Verdict); 3] {
    [
        // The issue's example: `grep`, `sort` and `wc` are not in
        // `readonly`'s allow list, so the strictest answer is ask.
        (
            "readonly_5cmd",
            "tool:bash:ls -la | grep foo | sort | head -5 | wc -l",
            Verdict::Ask,
        ),
        // Every command allowed, so all five are judged.
        (
            "readonly_5cmd_all_allowed",
            "tool:bash:ls -la | cat | head -50 | tail -5 | head -1",
            Verdict::Allow,
        ),
        // Quotes leave the fast path, so brush-parser does the parsing.
        (
            "readonly_5cmd_quoted",
            "tool:bash:ls -la 'my dir' | cat | head -50 | tail -5 | head -1",
            Verdict::Allow,
        ),
    ]
}

/// One `like` rule of the Cedar model: a `permit` when the action is `like`
/// `pattern`, unless it is `like` `unless` (Cedar's stand-in for a
/// negative look-ahead).
#[derive(Debug, Clone)]
pub struct LikeRule {
    /// The `like` pattern (`*` is the wildcard).
    pub pattern: String,
    /// An optional `like` pattern that vetoes the rule.
    pub unless: Option<String>,
}

impl LikeRule {
    /// A rule without an `unless` clause.
    pub fn new(pattern: impl Into<String>) -> Self {
        LikeRule {
            pattern: pattern.into(),
            unless: None,
        }
    }

    /// A rule vetoed by `unless`.
    pub fn unless(pattern: impl Into<String>, unless: impl Into<String>) -> Self {
        LikeRule {
            pattern: pattern.into(),
            unless: Some(unless.into()),
        }
    }

    fn to_cedar(&self, out: &mut String) {
        // The benchmark patterns contain no `"` or `\`, so no escaping is needed.
        let _ = write!(
            out,
            "permit(principal, action, resource) when {{ context.action like \"{}\" }}",
            self.pattern
        );
        if let Some(unless) = &self.unless {
            let _ = write!(out, " unless {{ context.action like \"{unless}\" }}");
        }
        out.push_str(";\n");
    }
}

/// `standard` written as Cedar rules: (allow, ask). Its deny list is empty.
pub fn standard_cedar_rules() -> (Vec<LikeRule>, Vec<LikeRule>) {
    (
        vec![
            LikeRule::new("tool:file:*"),
            LikeRule::unless("tool:git:*", "tool:git:push*"),
        ],
        vec![
            LikeRule::new("tool:bash:*"),
            LikeRule::new("tool:git:push*"),
        ],
    )
}

/// The 200-pattern profile as Cedar rules (all in the allow set).
pub fn svc_cedar_rules() -> Vec<LikeRule> {
    (0..SVC_PATTERNS)
        .map(|i| LikeRule::new(format!("tool:svc{i:03}:op*")))
        .collect()
}

/// Why the Cedar model could not be built or queried.
#[derive(Debug)]
pub enum CedarError {
    /// A policy did not parse.
    Parse(Box<ParseErrors>),
    /// An entity uid did not parse.
    Uid(String),
    /// The context could not be built.
    Context(Box<ContextCreationError>),
    /// The request was rejected.
    Request(Box<RequestValidationError>),
}

impl std::fmt::Display for CedarError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Parse(e) => write!(f, "policy does not parse: {e}"),
            Self::Uid(e) => write!(f, "entity uid does not parse: {e}"),
            Self::Context(e) => write!(f, "context: {e}"),
            Self::Request(e) => write!(f, "request: {e}"),
        }
    }
}

impl std::error::Error for CedarError {}

/// actiongate's deny / allow / ask cascade as Cedar policy sets.
pub struct CedarProfile {
    deny: Option<PolicySet>,
    allow: Option<PolicySet>,
    ask: Option<PolicySet>,
    authorizer: Authorizer,
    entities: Entities,
    principal: EntityUid,
    action: EntityUid,
    resource: EntityUid,
}

fn policy_set(rules: &[LikeRule]) -> Result<Option<PolicySet>, CedarError> {
    if rules.is_empty() {
        return Ok(None);
    }
    let mut src = String::new();
    for rule in rules {
        rule.to_cedar(&mut src);
    }
    PolicySet::from_str(&src)
        .map(Some)
        .map_err(|e| CedarError::Parse(Box::new(e)))
}

fn uid(s: &str) -> Result<EntityUid, CedarError> {
    EntityUid::from_str(s).map_err(|e| CedarError::Uid(e.to_string()))
}

impl CedarProfile {
    /// Compiles the three lists into policy sets.
    pub fn new(
        deny: &[LikeRule],
        allow: &[LikeRule],
        ask: &[LikeRule],
    ) -> Result<Self, CedarError> {
        Ok(CedarProfile {
            deny: policy_set(deny)?,
            allow: policy_set(allow)?,
            ask: policy_set(ask)?,
            authorizer: Authorizer::new(),
            entities: Entities::empty(),
            principal: uid(r#"Agent::"bench""#)?,
            action: uid(r#"Action::"run""#)?,
            resource: uid(r#"Tool::"any""#)?,
        })
    }

    /// The Cedar request for an action string.
    pub fn request(&self, action: &str) -> Result<Request, CedarError> {
        let context = Context::from_pairs([(
            "action".to_owned(),
            RestrictedExpression::new_string(action.to_owned()),
        )])
        .map_err(|e| CedarError::Context(Box::new(e)))?;
        Request::new(
            self.principal.clone(),
            self.action.clone(),
            self.resource.clone(),
            context,
            None,
        )
        .map_err(|e| CedarError::Request(Box::new(e)))
    }

    fn permits(&self, set: Option<&PolicySet>, request: &Request) -> bool {
        set.is_some_and(|set| {
            self.authorizer
                .is_authorized(request, set, &self.entities)
                .decision()
                == Decision::Allow
        })
    }

    /// The cascade on a prepared request.
    pub fn check_request(&self, request: &Request) -> Verdict {
        if self.permits(self.deny.as_ref(), request) {
            Verdict::Deny
        } else if self.permits(self.allow.as_ref(), request) {
            Verdict::Allow
        } else if self.permits(self.ask.as_ref(), request) {
            Verdict::Ask
        } else {
            Verdict::Deny
        }
    }

    /// Builds the request for `action`, then runs the cascade.
    pub fn check(&self, action: &str) -> Result<Verdict, CedarError> {
        Ok(self.check_request(&self.request(action)?))
    }

    /// Whether evaluating `request` against any set produced errors (which
    /// Cedar reports as diagnostics and otherwise skips).
    pub fn has_errors(&self, request: &Request) -> bool {
        [&self.deny, &self.allow, &self.ask]
            .into_iter()
            .flatten()
            .any(|set| {
                self.authorizer
                    .is_authorized(request, set, &self.entities)
                    .diagnostics()
                    .errors()
                    .next()
                    .is_some()
            })
    }
}

/// `standard` in Cedar.
pub fn standard_cedar() -> Result<CedarProfile, CedarError> {
    let (allow, ask) = standard_cedar_rules();
    CedarProfile::new(&[], &allow, &ask)
}

/// The 200-pattern profile in Cedar.
pub fn svc_cedar() -> Result<CedarProfile, CedarError> {
    CedarProfile::new(&[], &svc_cedar_rules(), &[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use actiongate_policy::{check, get_preset};

    #[test]
    fn generated_actions_have_the_requested_length() {
        for len in SIZES {
            assert_eq!(file_action(len).len(), len);
            assert_eq!(bash_action(len).len(), len);
        }
        for (_, action) in svc_requests() {
            assert_eq!(action.len(), 50, "{action}");
        }
    }

    #[test]
    fn cedar_standard_agrees_with_actiongate_standard() {
        let standard = get_preset("standard").unwrap();
        let cedar = standard_cedar().unwrap();
        for (name, action, expected) in standard_requests() {
            assert_eq!(check(action, &standard), expected, "actiongate {name}");
            assert_eq!(cedar.check(action).unwrap(), expected, "cedar {name}");
            assert!(!cedar.has_errors(&cedar.request(action).unwrap()), "{name}");
        }
    }

    #[test]
    fn cedar_svc_agrees_with_actiongate_svc() {
        let profile = svc_profile().unwrap();
        let cedar = svc_cedar().unwrap();
        for (name, action) in svc_requests() {
            let expected = if name == "miss" {
                Verdict::Deny
            } else {
                Verdict::Allow
            };
            assert_eq!(check(&action, &profile), expected, "actiongate {name}");
            assert_eq!(cedar.check(&action).unwrap(), expected, "cedar {name}");
        }
    }

    #[test]
    fn cedar_unless_models_the_look_ahead() {
        let standard = get_preset("standard").unwrap();
        let cedar = standard_cedar().unwrap();
        for action in [
            "tool:git:status",
            "tool:git:push",
            "tool:git:pushy",
            "tool:git:",
            "tool:file:",
            "tool:gitx:status",
            "tool:file_evil:hack",
        ] {
            assert_eq!(
                cedar.check(action).unwrap(),
                check(action, &standard),
                "{action}"
            );
        }
    }

    #[test]
    fn preset_and_pipeline_verdicts_are_as_documented() {
        let readonly = get_preset("readonly").unwrap();
        for (name, action, expected) in pipelines() {
            assert_eq!(check(action, &readonly), expected, "{name}");
        }
    }
}
