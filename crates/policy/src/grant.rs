//! Grants: a human's standing permission for an agent (or any agent), for a
//! handler permission within a scope or for a tool's commands matching a
//! pattern, until it expires or is revoked.

use crate::pattern::{PatternError, PatternSet, SetMatch};
use crate::profile::{DEFAULT_SHELL_TOOLS, GIT_TOOL};
use crate::shell::{Dialect, analyze, analyze_shell};
use chrono::{DateTime, Utc};
use globset::GlobBuilder;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The compiled pattern of a decision-only grant: which tool, and which
/// details of it, the grant allows. The pattern must match the whole detail,
/// exactly like a profile allow pattern; for shell tools it must match every
/// simple command and the command must be free of hazards.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "ToolPatternSpec", into = "ToolPatternSpec")]
pub struct ToolPattern {
    tool: String,
    set: PatternSet,
    /// The pattern is for the whole command line, not each simple command
    /// of it (what a plan's step grants: that line as approved).
    whole_line: bool,
}

#[derive(Serialize, Deserialize)]
struct ToolPatternSpec {
    tool: String,
    pattern: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    whole_line: bool,
}

impl ToolPattern {
    /// Compiles `pattern` (a regex over the detail) for `tool`.
    pub fn new(tool: &str, pattern: &str) -> Result<ToolPattern, PatternError> {
        let set = PatternSet::new(&[pattern]).map_err(|(_, e)| e)?;
        Ok(ToolPattern {
            tool: tool.to_owned(),
            set,
            whole_line: false,
        })
    }

    /// Compiles `pattern` for `tool` as a pattern over the whole detail:
    /// for a shell tool, the command line as a whole, never one of its
    /// simple commands alone.
    pub fn whole_line(tool: &str, pattern: &str) -> Result<ToolPattern, PatternError> {
        Ok(ToolPattern {
            whole_line: true,
            ..ToolPattern::new(tool, pattern)?
        })
    }

    /// Whether the pattern is for the whole line ([`ToolPattern::whole_line`]).
    pub fn is_whole_line(&self) -> bool {
        self.whole_line
    }

    /// The tool this pattern is for.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The pattern as written.
    pub fn pattern(&self) -> &str {
        self.set.pattern(0)
    }

    /// Whether the pattern matches the whole of one (simple-command) detail.
    pub(crate) fn matches(&self, detail: &str) -> SetMatch {
        self.set.matches_any(detail)
    }
}

impl PartialEq for ToolPattern {
    fn eq(&self, other: &Self) -> bool {
        self.tool == other.tool
            && self.pattern() == other.pattern()
            && self.whole_line == other.whole_line
    }
}

impl TryFrom<ToolPatternSpec> for ToolPattern {
    type Error = PatternError;

    fn try_from(spec: ToolPatternSpec) -> Result<Self, Self::Error> {
        if spec.whole_line {
            ToolPattern::whole_line(&spec.tool, &spec.pattern)
        } else {
            ToolPattern::new(&spec.tool, &spec.pattern)
        }
    }
}

impl From<ToolPattern> for ToolPatternSpec {
    fn from(p: ToolPattern) -> Self {
        ToolPatternSpec {
            pattern: p.pattern().to_owned(),
            whole_line: p.whole_line,
            tool: p.tool,
        }
    }
}

/// What a grant permits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GrantTarget {
    /// A permission a handler declares, within a scope.
    Permission {
        /// The handler id.
        handler: String,
        /// The permission name.
        permission: String,
        /// Scope keys and the values they must have; a string value holding
        /// `*` or `?` is a glob. A key left out matches any value.
        scope: Map<String, Value>,
    },
    /// Decision-only actions of a tool whose detail matches a pattern.
    Tool(ToolPattern),
}

/// A standing permission granted by a human.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    /// The grant's id.
    pub id: String,
    /// The agent it is for, or `None` for any agent.
    pub agent: Option<String>,
    /// What it permits.
    pub target: GrantTarget,
    /// When it stops counting (`None`: never). At that instant it is expired.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// The permission a handler action needs, as seen by a grant.
#[derive(Debug, Clone, Copy)]
pub struct PermissionRef<'a> {
    /// The handler id.
    pub handler: &'a str,
    /// The permission name.
    pub permission: &'a str,
    /// The action's scope values.
    pub scope: &'a Map<String, Value>,
    /// The call itself: the action's name and its params as shown
    /// (sensitive values masked), for grants of one call
    /// ([`CALL_SCOPE_KEY`]). `None` where there is no call (a check of
    /// whether a permission is held): such grants do not cover it.
    pub call: Option<(&'a str, &'a Value)>,
}

/// The scope key of a grant that covers one call only (a plan step's):
/// its value is `{"action": NAME, "params": PARAMS}`, which must equal the
/// call's action name and its params as shown, whatever else its scope
/// says. Matched against the call, never against a scope value of the
/// same name (a handler cannot declare one that forges it).
pub const CALL_SCOPE_KEY: &str = "@call";

/// The value of [`CALL_SCOPE_KEY`] for action `name` with `params` (as
/// shown, sensitive values masked).
pub fn call_scope_value(name: &str, params: &Value) -> Value {
    serde_json::json!({"action": name, "params": params})
}

/// Whether a granted [`CALL_SCOPE_KEY`] value names exactly `call`.
fn call_matches(granted: &Value, call: Option<(&str, &Value)>) -> bool {
    let (Some((name, params)), Value::Object(g)) = (call, granted) else {
        return false;
    };
    g.len() == 2
        && g.get("action").and_then(Value::as_str) == Some(name)
        && g.get("params") == Some(params)
}

/// An action to decide about.
///
/// For a handler action `tool` is the handler id, `detail` its rendered
/// detail and `permission` is set; for a decision-only action `permission`
/// is `None`.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The agent asking.
    pub agent: &'a str,
    /// The tool (or handler id).
    pub tool: &'a str,
    /// The detail of the action string.
    pub detail: &'a str,
    /// The permission a handler action needs.
    pub permission: Option<PermissionRef<'a>>,
}

impl Grant {
    /// Neither revoked nor expired at `now`.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none_or(|t| t > now) && self.expires_at.is_none_or(|t| t > now)
    }

    /// For this agent, or for any agent.
    pub fn applies_to(&self, agent: &str) -> bool {
        self.agent.as_deref().is_none_or(|a| a == agent)
    }

    /// Whether this grant alone allows `req` at `now`.
    ///
    /// Tool grants treat only [`DEFAULT_SHELL_TOOLS`] as shells here;
    /// [`crate::decide`] also honours the profile's extra shell tools.
    pub fn covers(&self, req: &Request<'_>, now: DateTime<Utc>) -> bool {
        if !self.is_active(now) || !self.applies_to(req.agent) {
            return false;
        }
        match &self.target {
            GrantTarget::Permission { .. } => self.covers_permission(req),
            GrantTarget::Tool(pattern) => {
                // A handler action needs a permission grant: a tool grant
                // whose tool happens to be named like the handler is none.
                if req.permission.is_some() || pattern.tool() != req.tool {
                    return false;
                }
                let dialect = match req.tool {
                    GIT_TOOL => Dialect::Git,
                    "sh" => Dialect::Sh,
                    t if DEFAULT_SHELL_TOOLS.contains(&t) => Dialect::Bash,
                    _ => return pattern.matches(req.detail) == SetMatch::Matched(0),
                };
                let analysis = analyze(dialect, req.detail);
                if pattern.whole_line {
                    return analysis.is_clean()
                        && pattern.matches(req.detail) == SetMatch::Matched(0);
                }
                let all = |mut it: std::slice::Iter<'_, String>| {
                    it.all(|c| pattern.matches(c) == SetMatch::Matched(0))
                };
                analysis.is_clean()
                    && if analysis.commands.is_empty() {
                        pattern.matches(req.detail) == SetMatch::Matched(0)
                    } else {
                        all(analysis.commands.iter())
                    }
            }
        }
    }

    /// The permission part of [`Grant::covers`]: handler, permission, scope.
    pub(crate) fn covers_permission(&self, req: &Request<'_>) -> bool {
        let (
            GrantTarget::Permission {
                handler,
                permission,
                scope,
            },
            Some(wanted),
        ) = (&self.target, req.permission)
        else {
            return false;
        };
        handler == wanted.handler
            && permission == wanted.permission
            && scope.iter().all(|(key, granted)| {
                if key == CALL_SCOPE_KEY {
                    call_matches(granted, wanted.call)
                } else {
                    key_matches(key, granted, wanted.scope)
                }
            })
    }
}

/// Whether every key of a grant's scope matches the action's scope.
///
/// A value matches exactly (JSON equality), or as a glob over the whole
/// string when the grant's value is a string containing `*` or `?` (`*`
/// crosses `/` and `.`), but never a value holding a `..` step or a control
/// character the glob does not hold itself: `docs/*` is not
/// `docs/../../etc/x`, which an executor resolving it would write outside
/// `docs/`, nor a name with a line break in it. A key the grant leaves out
/// matches any value; a grant key missing from the action does not match.
///
/// The key [`SHELL_SCOPE_KEY`] (`command`) holds a shell command line and is
/// matched like a shell tool's grant: a glob must match every simple command
/// of the parsed line, and a line with a hazard (substitution, redirection
/// to a file, …) or that cannot be parsed is never covered by a glob. So
/// `{"command": "ls*"}` covers `ls -la` but not `ls; rm -rf /`. An exact
/// value still matches only that exact line.
pub fn scope_matches(grant_scope: &Map<String, Value>, action_scope: &Map<String, Value>) -> bool {
    grant_scope
        .iter()
        .all(|(key, granted)| key_matches(key, granted, action_scope))
}

/// One key of [`scope_matches`].
fn key_matches(key: &str, granted: &Value, action_scope: &Map<String, Value>) -> bool {
    action_scope.get(key).is_some_and(|actual| match granted {
        Value::String(glob) if glob.contains(['*', '?']) => actual.as_str().is_some_and(|actual| {
            if key == SHELL_SCOPE_KEY {
                shell_glob_matches(glob, actual)
            } else {
                glob_matches(glob, actual) && !climbs_or_breaks(glob, actual)
            }
        }),
        _ => granted == actual,
    })
}

/// Whether `actual` holds a `..` path step, or a control character, that
/// `glob` does not hold itself ([`scope_matches`]).
fn climbs_or_breaks(glob: &str, actual: &str) -> bool {
    let climbs = |s: &str| s.split(['/', '\\']).any(|step| step == "..");
    let breaks = |s: &str| s.chars().any(char::is_control);
    (climbs(actual) && !climbs(glob)) || (breaks(actual) && !breaks(glob))
}

/// `scope` with each string value that [`scope_matches`] would read as a
/// glob (it holds `*` or `?`) escaped, so that it matches only itself. For
/// a grant built from an action's own scope values, which its agent chose:
/// a plan step's or "approve and remember"'s default. A glob there is the
/// agent's text, not a human's choice to widen the grant.
pub fn literal_scope(scope: &Map<String, Value>) -> Map<String, Value> {
    scope
        .iter()
        .map(|(key, value)| {
            let value = match value {
                Value::String(s) if s.contains(['*', '?']) => Value::String(globset::escape(s)),
                other => other.clone(),
            };
            (key.clone(), value)
        })
        .collect()
}

/// The scope key whose value is a shell command line (see [`scope_matches`]
/// and, for profile patterns, [`crate::decide()`]).
pub const SHELL_SCOPE_KEY: &str = "command";

fn shell_glob_matches(glob: &str, line: &str) -> bool {
    let analysis = analyze_shell(line);
    analysis.is_clean()
        && if analysis.commands.is_empty() {
            glob_matches(glob, line)
        } else {
            analysis.commands.iter().all(|c| glob_matches(glob, c))
        }
}

fn glob_matches(glob: &str, value: &str) -> bool {
    // An invalid glob matches nothing: a grant must not widen by accident.
    GlobBuilder::new(glob)
        .literal_separator(false)
        .build()
        .is_ok_and(|g| g.compile_matcher().is_match(value))
}
