//! Profiles: the allow, ask and deny pattern lists of an agent, compiled
//! once, and how they are written down (a preset name or an object).

use crate::pattern::{Coverage, PatternSet};
use crate::presets::{self, UnknownPresetError};
use crate::shell::Dialect;
use crate::verdict::ListKind;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Tools whose detail is a shell command and is judged command by command.
pub const DEFAULT_SHELL_TOOLS: &[&str] = &["bash", "sh"];

/// The tool whose detail is git's argument list, analysed as such
/// ([`Dialect::Git`]) under every profile.
pub const GIT_TOOL: &str = "git";

/// Tool names the policy gives a meaning of its own: the shell tools and
/// `git` (whose details are analysed), the tools the presets and the Claude
/// Code hook name (`file`, `Read`, `Glob`, `Grep`, `WebFetch`,
/// `WebSearch`), and the hook's raw names. A handler id must not take one
/// (compared case-insensitively, see [`is_builtin_tool`]), or its actions
/// would get the rules written for that tool.
pub const BUILTIN_TOOLS: &[&str] = &[
    "bash",
    "sh",
    "git",
    "file",
    "Read",
    "Glob",
    "Grep",
    "WebFetch",
    "WebSearch",
    "Bash",
    "Edit",
    "MultiEdit",
    "Write",
    "NotebookEdit",
    "Task",
    "Agent",
    "TaskStop",
    "TodoWrite",
    // The agents' bookkeeping `readonly` allows (`presets::HOUSEKEEPING`).
    "TodoRead",
    "TaskCreate",
    "TaskGet",
    "TaskUpdate",
    "TaskList",
    "TaskOutput",
    "ToolSearch",
    "AskUserQuestion",
    "EnterPlanMode",
    "ExitPlanMode",
    "question",
    "update_todo",
    "write_todos",
    "tracker_create_task",
    "tracker_get_task",
    "tracker_list_tasks",
    "tracker_update_task",
    "tracker_add_dependency",
    "tracker_visualize",
    "update_topic",
    "ask_user",
    "enter_plan_mode",
    "exit_plan_mode",
    "report_intent",
    "read_bash",
    "list_bash",
];

/// Whether `name` is (in any letter case) one of [`BUILTIN_TOOLS`]: such a
/// name cannot be a handler id.
pub fn is_builtin_tool(name: &str) -> bool {
    BUILTIN_TOOLS.iter().any(|t| t.eq_ignore_ascii_case(name))
}

/// Builds the action string `tool:<tool>:<detail>`.
pub fn format_action(tool: &str, detail: &str) -> String {
    let mut action = String::with_capacity(6 + tool.len() + detail.len());
    action.push_str("tool:");
    action.push_str(tool);
    action.push(':');
    action.push_str(detail);
    action
}

/// Splits an action string `tool:<tool>:<detail>` into tool and detail.
///
/// The tool ends at the first colon after `tool:`; the detail may contain
/// colons. Returns `None` for strings not of that form.
pub fn split_action(action: &str) -> Option<(&str, &str)> {
    let rest = action.strip_prefix("tool:")?;
    // A byte search: tool names are short, and `:` is ASCII, so the split
    // falls on a character boundary.
    let colon = rest.bytes().position(|b| b == b':')?;
    Some((rest.get(..colon)?, rest.get(colon + 1..)?))
}

/// How a profile is written in configuration and on the wire: a preset name
/// (`"standard"`) or an object of pattern lists.
// A spec is read once when a profile is set and kept beside the compiled
// profile; boxing the custom lists would only add an allocation there.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ProfileSpec {
    /// The name of a built-in preset (see [`crate::preset_names`]).
    Preset(String),
    /// Pattern lists written out.
    Custom(CustomProfile),
}

/// Reads a string as a preset name and a map as [`CustomProfile`], so
/// that an error names the field and the problem ("unknown field
/// `aprovals` in profile") instead of serde's "did not match any variant
/// of untagged enum".
impl<'de> Deserialize<'de> for ProfileSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = ProfileSpec;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "a preset name or an object with `allow`, `ask`, `deny` and `shell_tools`",
                )
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ProfileSpec, E> {
                Ok(ProfileSpec::Preset(v.to_owned()))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<ProfileSpec, A::Error> {
                CustomProfile::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(ProfileSpec::Custom)
                    .map_err(|e| serde::de::Error::custom(format!("{e} in profile")))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// A profile written out as pattern lists.
///
/// Every pattern is a regex that must match the whole action string
/// `tool:<tool>:<detail>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomProfile {
    /// Actions matching one of these are allowed (unless a deny pattern matches).
    pub allow: Vec<String>,
    /// Actions matching one of these (and no allow pattern) go to a human.
    pub ask: Vec<String>,
    /// Actions matching one of these are denied; nothing overrides them.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Extra tools (beside [`DEFAULT_SHELL_TOOLS`]) whose detail is a shell
    /// command to be judged command by command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shell_tools: Vec<String>,
    /// Asked actions that need more than one approval, or particular
    /// approvers, or escalation (`docs/teams.md`); the first rule whose
    /// pattern matches the whole action string applies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<crate::approvals::ApprovalRule>,
    /// Actions it must allow, ask and deny, checked when it is set
    /// ([`crate::examples`]).
    #[serde(default, skip_serializing_if = "crate::examples::Examples::is_empty")]
    pub examples: crate::examples::Examples,
    /// At most this many actions an hour allowed by the allow patterns;
    /// past it they ask ([`crate::rate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_per_hour: Option<u32>,
    /// Limits per allow pattern.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rule_limits: Vec<crate::rate::RuleLimit>,
    /// Actions that read untrusted content: once one is allowed or approved
    /// in a session, the session is tainted. Absent: the presets' (web
    /// fetches, MCP tools, shell lines that fetch); `[]`: none.
    #[serde(default = "crate::presets::default_taints")]
    pub taints: Vec<String>,
    /// Ways out: in a tainted session, an action matching one of these is
    /// asked even where a rule or a grant would allow it. Absent: the
    /// presets' (`docs/sessions.md#taint`); `[]`: none.
    #[serde(default = "crate::presets::default_guarded")]
    pub guarded: Vec<String>,
}

/// At most this many patterns in a profile, all its lists (`allow`, `ask`,
/// `deny`, `taints`, `guarded`, `approvals`) together. The largest preset
/// holds well under a hundred; a profile of tens of thousands took minutes
/// to compile, and compiling is what a request waits for.
pub const MAX_PATTERNS: usize = 2_000;

/// At most this many bytes in one pattern (as for an approvals rule's).
pub const MAX_PATTERN_LEN: usize = 4_096;

/// Why a profile could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// A pattern does not compile.
    #[error("invalid pattern #{index} in the {list} list (`{pattern}`): {message}")]
    InvalidPattern {
        /// The list holding the pattern.
        list: ListKind,
        /// Its position in that list, from 0.
        index: usize,
        /// The pattern as written.
        pattern: String,
        /// What the regex engine said.
        message: String,
    },
    /// A `taints` or `guarded` pattern does not compile.
    #[error("invalid pattern #{index} in the {list} list (`{pattern}`): {message}")]
    InvalidSessionPattern {
        /// `taints` or `guarded`.
        list: &'static str,
        /// Its position in that list, from 0.
        index: usize,
        /// The pattern as written.
        pattern: String,
        /// What the regex engine said.
        message: String,
    },
    /// The profile holds more than [`MAX_PATTERNS`] patterns in all its
    /// lists together.
    #[error("{count} patterns in all lists, default taints and guarded included; at most {max}")]
    TooManyPatterns {
        /// The longest list, which an error names.
        list: &'static str,
        /// How many patterns the profile holds.
        count: usize,
        /// [`MAX_PATTERNS`].
        max: usize,
    },
    /// A pattern is longer than [`MAX_PATTERN_LEN`] bytes.
    #[error("pattern #{index} in the {list} list is {len} bytes long; at most {max}")]
    PatternTooLong {
        /// `allow`, `ask`, `deny`, `taints` or `guarded`.
        list: &'static str,
        /// Its position in that list, from 0.
        index: usize,
        /// Its length in bytes.
        len: usize,
        /// [`MAX_PATTERN_LEN`].
        max: usize,
    },
    /// The profile names a preset that does not exist.
    #[error(transparent)]
    UnknownPreset(#[from] UnknownPresetError),
    /// An approvals rule is invalid.
    #[error(transparent)]
    InvalidApprovalRule(#[from] crate::approvals::ApprovalRuleError),
}

/// A compiled profile. Cheap to clone (the compiled patterns are shared).
///
/// Serializes as the [`ProfileSpec`] it was built from, so a preset stays a
/// preset name.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "ProfileSpec", into = "ProfileSpec")]
pub struct Profile {
    inner: Arc<Compiled>,
}

#[derive(Debug)]
struct Compiled {
    spec: ProfileSpec,
    allow: PatternSet,
    ask: PatternSet,
    deny: PatternSet,
    taints: PatternSet,
    guarded: PatternSet,
    shell_tools: Vec<String>,
    /// For each of `shell_tools`, whether [`crate::check`] may skip the
    /// shell analysis.
    shortcuts: Vec<ShellShortcut>,
    /// The same for the `git` tool.
    git_shortcut: ShellShortcut,
    /// The approvals rules, compiled.
    approvals: Vec<crate::approvals::CompiledRule>,
}

/// When the verdict for a shell tool's action is the same whether or not
/// the command is parsed, so [`crate::check`] can judge the action string
/// as a whole.
///
/// The analysis matters only through the lists: deny patterns judge every
/// command, allow patterns (which hazards cap at ask) and ask patterns judge
/// each command, and the strictest answer wins. Every command is judged as
/// `tool:<tool>:<command>`, and so is the whole action. So if no deny or
/// allow pattern can match any string starting with `tool:<tool>:`, every
/// command ends at the ask list, and the answer is the same for all of
/// them and for the whole action when either no ask pattern can match such
/// a string (deny by default) or one ask pattern matches all of them (ask).
/// Look-around ask patterns that could run are excluded, since hitting the
/// backtracking limit on one command but not another changes the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShellShortcut {
    /// The analysis can change the verdict.
    Never,
    /// Same verdict unless the detail holds a `\n`: the ask pattern is like
    /// `tool:bash:.*`, which a multi-line action does not match but each of
    /// its commands does. (A command of a detail without `\n` holds none:
    /// commands are rendered from the detail's own words.)
    WithoutNewline,
    /// Same verdict for every detail.
    Always,
}

impl ShellShortcut {
    fn for_tool(tool: &str, deny: &PatternSet, allow: &PatternSet, ask: &PatternSet) -> Self {
        let start = format_action(tool, "");
        if deny.may_match_starting_with(&start) || allow.may_match_starting_with(&start) {
            return ShellShortcut::Never;
        }
        if !ask.may_match_starting_with(&start) {
            return ShellShortcut::Always;
        }
        if ask.may_backtrack_starting_with(&start) {
            return ShellShortcut::Never;
        }
        match ask.coverage(&start) {
            Coverage::All => ShellShortcut::Always,
            Coverage::WithoutNewline => ShellShortcut::WithoutNewline,
            Coverage::Partial => ShellShortcut::Never,
        }
    }
}

/// Refuses a profile over [`MAX_PATTERNS`] or with a pattern over
/// [`MAX_PATTERN_LEN`] before anything is compiled, so that refusing it
/// costs nothing.
fn check_size(lists: &CustomProfile) -> Result<(), ProfileError> {
    let named: [(&'static str, &[String]); 5] = [
        ("allow", &lists.allow),
        ("ask", &lists.ask),
        ("deny", &lists.deny),
        ("taints", &lists.taints),
        ("guarded", &lists.guarded),
    ];
    let count = named.iter().map(|(_, l)| l.len()).sum::<usize>() + lists.approvals.len();
    if count > MAX_PATTERNS {
        let list = (named.iter().map(|(name, l)| (*name, l.len())))
            .chain([("approvals", lists.approvals.len())])
            .max_by_key(|(_, n)| *n)
            .map_or("allow", |(name, _)| name);
        return Err(ProfileError::TooManyPatterns {
            list,
            count,
            max: MAX_PATTERNS,
        });
    }
    for (list, patterns) in named {
        if let Some((index, p)) = patterns
            .iter()
            .enumerate()
            .find(|(_, p)| p.len() > MAX_PATTERN_LEN)
        {
            return Err(ProfileError::PatternTooLong {
                list,
                index,
                len: p.len(),
                max: MAX_PATTERN_LEN,
            });
        }
    }
    Ok(())
}

impl Profile {
    /// Builds a profile from its written form, compiling every pattern.
    pub fn from_spec(spec: ProfileSpec) -> Result<Profile, ProfileError> {
        match spec {
            ProfileSpec::Preset(name) => Ok(presets::get_preset(&name)?),
            ProfileSpec::Custom(custom) => {
                Self::compile(ProfileSpec::Custom(custom.clone()), &custom)
            }
        }
    }

    /// Builds a profile from pattern lists.
    pub fn custom(custom: CustomProfile) -> Result<Profile, ProfileError> {
        Self::from_spec(ProfileSpec::Custom(custom))
    }

    /// Compiles `lists`, remembering `spec` as the written form.
    pub(crate) fn compile(
        spec: ProfileSpec,
        lists: &CustomProfile,
    ) -> Result<Profile, ProfileError> {
        check_size(lists)?;
        let compile = |list: ListKind, patterns: &[String]| {
            PatternSet::new(patterns).map_err(|(index, e)| ProfileError::InvalidPattern {
                list,
                index,
                pattern: e.pattern,
                message: e.message,
            })
        };
        let mut shell_tools: Vec<String> = DEFAULT_SHELL_TOOLS
            .iter()
            .map(|t| (*t).to_owned())
            .collect();
        for tool in &lists.shell_tools {
            if !shell_tools.contains(tool) {
                shell_tools.push(tool.clone());
            }
        }
        let deny = compile(ListKind::Deny, &lists.deny)?;
        let allow = compile(ListKind::Allow, &lists.allow)?;
        let ask = compile(ListKind::Ask, &lists.ask)?;
        let session_list = |list: &'static str, patterns: &[String]| {
            PatternSet::new(patterns).map_err(|(index, e)| ProfileError::InvalidSessionPattern {
                list,
                index,
                pattern: e.pattern,
                message: e.message,
            })
        };
        let taints = session_list("taints", &lists.taints)?;
        let guarded = session_list("guarded", &lists.guarded)?;
        let shortcuts = shell_tools
            .iter()
            .map(|tool| ShellShortcut::for_tool(tool, &deny, &allow, &ask))
            .collect();
        let git_shortcut = ShellShortcut::for_tool(GIT_TOOL, &deny, &allow, &ask);
        let approvals = crate::approvals::compile_rules(&lists.approvals)?;
        Ok(Profile {
            inner: Arc::new(Compiled {
                deny,
                allow,
                ask,
                taints,
                guarded,
                spec,
                shell_tools,
                shortcuts,
                git_shortcut,
                approvals,
            }),
        })
    }

    /// The approvals rules that apply to `action` (an action string): the
    /// first whose pattern matches it whole and, for a tool whose detail
    /// is analysed (shells, git), the first that matches each of its
    /// simple commands as deny and allow patterns see them, so a rule
    /// over `rm` governs `cd x && rm -r y` too; and the commands only deny
    /// patterns see, buried where the walk does not enter
    /// (`${x:-$(rm -r y)}`, `bash -c 'rm -r y'`): a rule governs what a
    /// deny pattern would find, or an agent could shed it by burying its
    /// command. Every command's rule applies, not only the first rule any
    /// of them matches: an `ls` whose rule comes earlier does not shed the
    /// rule of the `rm` after it. Each rule once, in the profile's order.
    ///
    /// `scope` is a handler action's: when it has a command line
    /// ([`crate::grant::SHELL_SCOPE_KEY`]) that ends the detail (as in
    /// `execute_command {content}`), each of its commands is matched as
    /// `tool:<handler>:<detail before the command><command>`, as deny and
    /// allow patterns judge it.
    ///
    /// What the analyser cannot name fails closed: a command whose program
    /// it cannot read (`$RM -rf x`, `/bin/r? x`, a line it cannot parse),
    /// or a detail it does not analyse holding characters a reader may
    /// not see (`p\u{200b}rod eu`), is governed by every rule that may
    /// match an action of its tool ([`crate::approvals::unclear`]).
    pub fn approval_rules_for(
        &self,
        action: &str,
        scope: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Vec<&crate::approvals::CompiledRule> {
        let rules = &self.inner.approvals;
        if rules.is_empty() {
            return Vec::new();
        }
        let command = scope
            .and_then(|s| s.get(crate::grant::SHELL_SCOPE_KEY))
            .and_then(serde_json::Value::as_str);
        let mut unclear = None;
        let segments: Vec<String> = match split_action(action) {
            Some((tool, detail)) => {
                let part = match command.and_then(|c| detail.strip_suffix(c).map(|p| (p, c))) {
                    Some((prefix, command)) => {
                        Some((prefix, command, self.dialect(tool).unwrap_or(Dialect::Bash)))
                    }
                    None => self.dialect(tool).map(|d| ("", detail, d)),
                };
                match part {
                    Some((prefix, command, dialect)) => {
                        let analysis = crate::shell::analyze(dialect, command);
                        unclear = crate::approvals::unclear_programs(&analysis)
                            .then(|| format_action(tool, prefix));
                        // Each command also by its program's own name: a
                        // rule over `rm .*` governs `/bin/rm -rf /srv` (the
                        // same program, called by its path).
                        analysis
                            .commands
                            .iter()
                            .chain(&analysis.hidden)
                            .flat_map(|c| crate::approvals::spellings(c))
                            .map(|c| format_action(tool, &format!("{prefix}{c}")))
                            .collect()
                    }
                    // A detail that is not analysed is matched line by
                    // line too: `.` stops at a line break, so a newline
                    // sent after `prod eu` would shed a rule over
                    // `prod.*` (and its count of people). Every character
                    // a terminal, a page or a chat may show as a new line
                    // starts one, so what a human reads as `prod eu` on a
                    // line of its own is governed as such.
                    None => {
                        unclear = crate::approvals::unclear_detail(detail)
                            .then(|| format_action(tool, ""));
                        crate::approvals::lines(detail)
                            .map(|l| format_action(tool, l))
                            .collect()
                    }
                }
            }
            None => Vec::new(),
        };
        let mut applies: Vec<bool> = match &unclear {
            Some(prefix) => rules.iter().map(|r| r.may_match_from(prefix)).collect(),
            None => vec![false; rules.len()],
        };
        for s in std::iter::once(action).chain(segments.iter().map(String::as_str)) {
            if let Some(i) = rules.iter().position(|r| r.matches(s)) {
                applies[i] = true;
            }
        }
        rules
            .iter()
            .zip(applies)
            .filter_map(|(r, a)| a.then_some(r))
            .collect()
    }

    /// Every approvals rule, in order.
    pub fn approval_rules(&self) -> &[crate::approvals::CompiledRule] {
        &self.inner.approvals
    }

    /// The session lists: `taints` and `guarded` (judged in
    /// `session_calls`).
    pub(crate) fn session_lists(&self) -> (&PatternSet, &PatternSet) {
        (&self.inner.taints, &self.inner.guarded)
    }

    /// The written form this profile was built from.
    pub fn spec(&self) -> &ProfileSpec {
        &self.inner.spec
    }

    /// The compiled patterns of one list.
    pub fn list(&self, kind: ListKind) -> &PatternSet {
        match kind {
            ListKind::Allow => &self.inner.allow,
            ListKind::Ask => &self.inner.ask,
            ListKind::Deny => &self.inner.deny,
        }
    }

    /// All tools whose detail this profile parses as a shell command.
    pub fn shell_tools(&self) -> &[String] {
        &self.inner.shell_tools
    }

    /// Whether `tool`'s detail is parsed as a shell command.
    pub fn is_shell_tool(&self, tool: &str) -> bool {
        self.inner.shell_tools.iter().any(|t| t == tool)
    }

    /// How `tool`'s detail is analysed before the patterns see it: `git`
    /// as git's argument list, `sh` as a POSIX `sh` line, the other shell
    /// tools as bash lines; `None` for tools whose detail is matched as it
    /// is.
    pub fn dialect(&self, tool: &str) -> Option<Dialect> {
        if tool == GIT_TOOL {
            Some(Dialect::Git)
        } else if tool == "sh" {
            Some(Dialect::Sh)
        } else if self.is_shell_tool(tool) {
            Some(Dialect::Bash)
        } else {
            None
        }
    }

    /// `None` if `tool`'s detail is not analysed (see [`Profile::dialect`]),
    /// else whether [`crate::check`] may skip analysing it.
    pub(crate) fn shell_shortcut(&self, tool: &str) -> Option<ShellShortcut> {
        if tool == GIT_TOOL {
            return Some(self.inner.git_shortcut);
        }
        let i = self.inner.shell_tools.iter().position(|t| t == tool)?;
        self.inner.shortcuts.get(i).copied()
    }
}

impl PartialEq for Profile {
    fn eq(&self, other: &Self) -> bool {
        self.spec() == other.spec()
    }
}

impl TryFrom<ProfileSpec> for Profile {
    type Error = ProfileError;

    fn try_from(spec: ProfileSpec) -> Result<Self, Self::Error> {
        Profile::from_spec(spec)
    }
}

impl From<Profile> for ProfileSpec {
    fn from(profile: Profile) -> Self {
        profile.spec().clone()
    }
}

/// Shell tool names read as bash's where no profile names them.
pub(crate) const OTHER_SHELLS: [&str; 6] = ["bash", "zsh", "dash", "ksh", "mksh", "shell"];

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn lists(allow: usize, pattern: &str) -> CustomProfile {
        CustomProfile {
            allow: vec![pattern.to_owned(); allow],
            taints: Vec::new(),
            guarded: Vec::new(),
            ..CustomProfile::default()
        }
    }

    #[test]
    fn every_preset_fits_the_pattern_bound_many_times_over() {
        for name in crate::preset_names() {
            let c = crate::preset_spec(name).unwrap();
            let count = c.allow.len()
                + c.ask.len()
                + c.deny.len()
                + c.taints.len()
                + c.guarded.len()
                + c.approvals.len();
            assert!(count * 10 < MAX_PATTERNS, "{name}: {count} patterns");
        }
    }

    #[test]
    fn a_profile_over_the_pattern_bound_is_refused_before_compiling() {
        assert!(Profile::custom(lists(MAX_PATTERNS, "tool:x:a")).is_ok());
        let err = Profile::custom(lists(MAX_PATTERNS + 1, "tool:x:a")).unwrap_err();
        assert_eq!(
            err,
            ProfileError::TooManyPatterns {
                list: "allow",
                count: MAX_PATTERNS + 1,
                max: MAX_PATTERNS
            }
        );
        // The session lists count too.
        let mut c = lists(MAX_PATTERNS, "tool:x:a");
        c.guarded = vec!["tool:y:.*".into()];
        assert!(matches!(
            Profile::custom(c),
            Err(ProfileError::TooManyPatterns { .. })
        ));
    }

    #[test]
    fn too_many_approvals_rules_are_named_as_the_list_at_fault() {
        let mut c = lists(10, "tool:x:a");
        let rule: crate::approvals::ApprovalRule =
            serde_json::from_value(serde_json::json!({"pattern": "tool:x:.*"})).unwrap();
        c.approvals = vec![rule; MAX_PATTERNS];
        assert!(matches!(
            Profile::custom(c),
            Err(ProfileError::TooManyPatterns {
                list: "approvals",
                ..
            })
        ));
    }

    #[test]
    fn a_pattern_over_the_length_bound_is_refused_naming_it() {
        let mut c = lists(1, "tool:x:a");
        c.deny = vec![
            "tool:x:b".into(),
            format!("tool:x:{}", "a".repeat(MAX_PATTERN_LEN)),
        ];
        let err = Profile::custom(c).unwrap_err();
        assert!(
            matches!(
                err,
                ProfileError::PatternTooLong {
                    list: "deny",
                    index: 1,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn a_program_called_by_its_path_is_named_as_itself() {
        assert_eq!(
            crate::approvals::by_program_name("/bin/rm -rf /srv").unwrap(),
            "rm -rf /srv"
        );
        assert_eq!(
            crate::approvals::by_program_name("./deploy.sh prod").unwrap(),
            "deploy.sh prod"
        );
        assert_eq!(
            crate::approvals::by_program_name("/usr/bin/env").unwrap(),
            "env"
        );
        assert_eq!(crate::approvals::by_program_name("rm -rf /srv/x/y"), None);
        assert_eq!(crate::approvals::by_program_name("dir/ x"), None);
    }

    #[test]
    fn split_action_keeps_colons_in_detail() {
        assert_eq!(
            split_action("tool:bash:echo a:b"),
            Some(("bash", "echo a:b"))
        );
        assert_eq!(split_action("tool:x:"), Some(("x", "")));
        assert_eq!(split_action("nottool:x:y"), None);
        assert_eq!(split_action("tool:x"), None);
    }

    #[test]
    fn an_approvals_rule_governs_a_line_with_its_command_anywhere_in_it() {
        let p = Profile::custom(CustomProfile {
            allow: vec![],
            ask: vec!["(?s).*".into()],
            deny: vec![],
            shell_tools: vec![],
            approvals: vec![crate::approvals::ApprovalRule {
                pattern: "tool:bash:rm .*".into(),
                count: 2,
                approvers: vec![],
                escalate_after: None,
                escalate_to: None,
            }],
            examples: Default::default(),
            max_per_hour: None,
            rule_limits: Vec::new(),
            taints: Vec::new(),
            guarded: Vec::new(),
        })
        .unwrap();
        for line in [
            "tool:bash:rm -r out",
            "tool:bash:cd /tmp && rm -r out",
            "tool:bash:true; rm -r out",
            "tool:bash:ls | rm -r out",
            // The program called by its path, also behind a runner.
            "tool:bash:/bin/rm -rf /srv",
            "tool:bash:cd / && ./bin/rm -rf srv",
            "tool:bash:sudo /usr/bin/rm -rf /srv",
            "tool:bash:ls | xargs /bin/rm -rf",
        ] {
            assert!(!p.approval_rules_for(line, None).is_empty(), "{line}");
        }
        assert!(
            p.approval_rules_for("tool:bash:/srv/rm/ls -la", None)
                .is_empty()
        );
        assert!(p.approval_rules_for("tool:bash:ls -la", None).is_empty());
        // Tools matched as they are stay whole-string, each line of it.
        assert!(
            p.approval_rules_for("tool:http:x rm -r out", None)
                .is_empty()
        );
        let deploy = Profile::custom(CustomProfile {
            approvals: vec![crate::approvals::ApprovalRule {
                pattern: "tool:deploy:prod.*".into(),
                count: 2,
                approvers: vec![],
                escalate_after: None,
                escalate_to: None,
            }],
            ..CustomProfile::default()
        })
        .unwrap();
        for action in [
            "tool:deploy:prod eu",
            "tool:deploy:prod eu\n",
            "tool:deploy:x\nprod eu",
            "tool:deploy:x\rprod eu",
            "tool:deploy:x\r\nprod eu",
            "tool:deploy:staging\u{2028}prod eu",
            "tool:deploy:staging\u{85}prod eu",
            "tool:deploy:staging\u{0b}prod eu",
        ] {
            assert!(
                !deploy.approval_rules_for(action, None).is_empty(),
                "{action:?}"
            );
        }
        assert!(
            deploy
                .approval_rules_for("tool:deploy:staging\nx", None)
                .is_empty()
        );
    }

    /// An approvals rule over `pattern` asking `count` people, anyone.
    fn rule(pattern: &str, count: u32) -> crate::approvals::ApprovalRule {
        crate::approvals::ApprovalRule {
            pattern: pattern.into(),
            count,
            approvers: vec![],
            escalate_after: None,
            escalate_to: None,
        }
    }

    #[test]
    fn every_commands_first_approvals_rule_applies() {
        let p = Profile::custom(CustomProfile {
            ask: vec!["(?s).*".into()],
            approvals: vec![
                rule("tool:bash:ls( .*)?", 1),
                rule("tool:bash:rm .*", 2),
                rule("tool:bash:cat .*", 3),
            ],
            ..CustomProfile::default()
        })
        .unwrap();
        let counts = |line: &str| -> Vec<u32> {
            p.approval_rules_for(line, None)
                .iter()
                .map(|r| r.rule.count)
                .collect()
        };
        assert_eq!(counts("tool:bash:ls; rm -r out"), [1, 2]);
        assert_eq!(counts("tool:bash:ls $(rm -r out)"), [1, 2]);
        assert_eq!(counts("tool:bash:ls && ls -l"), [1]);
        assert_eq!(counts("tool:bash:cat x; ls"), [1, 3]);
        assert_eq!(counts("tool:bash:rm -r a; rm -r b"), [2]);
        assert!(counts("tool:bash:pwd").is_empty());
    }

    #[test]
    fn what_the_analyser_cannot_name_is_governed_by_every_rule_of_its_tool() {
        let p = Profile::custom(CustomProfile {
            ask: vec!["(?s).*".into()],
            approvals: vec![
                rule("tool:bash:rm( .*)?", 2),
                rule("tool:bash:.*", 1),
                rule("tool:deploy:prod.*", 3),
                rule("tool:fs:execute_command rm( .*)?", 4),
                rule("tool:fs:create_file .*", 5),
            ],
            ..CustomProfile::default()
        })
        .unwrap();
        let counts = |line: &str, scope: Option<&str>| -> Vec<u32> {
            let scope = scope.map(|c| {
                let mut m = serde_json::Map::new();
                m.insert(crate::grant::SHELL_SCOPE_KEY.into(), c.into());
                m
            });
            p.approval_rules_for(line, scope.as_ref())
                .iter()
                .map(|r| r.rule.count)
                .collect()
        };
        // The program's name built by the shell: every bash rule.
        for line in [
            "RM=rm; $RM -rf /srv",
            "$RM -rf /srv",
            "${RM} -rf /srv",
            "\"$(echo rm)\" -rf /srv",
            "/bin/r? -rf /srv",
            "/bin/[r]m -rf /srv",
            "a=r; ${a}m -rf /srv",
            "rm${IFS}-rf /srv",
            "$'\\x72m' -rf /srv",
            "r\u{200b}m -rf /srv",
            "bash -c \"$X\"",
            "eval \"$X\"",
            "x; rm -rf /srv )",
            // Programs run by what the line sets up, or by a wrapper.
            "hash -p /bin/rm ls; ls -rf /srv",
            "mapfile -C 'rm -rf /srv' -c 1 < list",
            "shopt -s expand_aliases; alias ll=rm; ll -rf /srv",
            ". /dev/stdin <<< 'rm -rf /srv'",
            "xargs -I{} sh -c {} <<< 'rm -rf /srv'",
            "awk 'BEGIN{system(\"rm -rf /srv\")}'",
            "sed -n '1e rm -rf /srv' list",
            "GIT_PAGER='rm -rf /srv' git -p log",
            "chronic rm -rf /srv",
            "firejail --quiet rm -rf /srv",
            "sg wheel 'rm -rf /srv'",
        ] {
            assert_eq!(counts(&format!("tool:bash:{line}"), None), [2, 1], "{line}");
        }
        // Named plainly, each its own rule.
        assert_eq!(counts("tool:bash:ls -la", None), [1]);
        assert_eq!(counts("tool:bash:sudo rm -rf /srv", None), [2, 1]);
        // A handler's command line: the rules of that handler action only.
        let line = "execute_command $RM -rf x";
        assert_eq!(counts(&format!("tool:fs:{line}"), Some("$RM -rf x")), [4]);
        assert!(counts("tool:fs:execute_command ls x", Some("ls x")).is_empty());
        // A detail that is not analysed, read otherwise than it matches.
        for detail in [
            "p\u{200b}rod eu",
            "\u{a0}prod eu",
            " prod eu",
            "prod eu\u{feff}",
            "\u{202e}ue dorp",
            "pr\u{ad}od",
            "p\u{3164}rod eu",
            "\u{440}r\u{43e}d eu",
            "\u{ff50}\u{ff52}\u{ff4f}\u{ff44} eu",
        ] {
            assert_eq!(
                counts(&format!("tool:deploy:{detail}"), None),
                [3],
                "{detail:?}"
            );
        }
        assert!(counts("tool:deploy:staging eu", None).is_empty());
        assert!(counts("tool:deploy:staging Zürich", None).is_empty());
    }

    #[test]
    fn invalid_pattern_error_names_list_index_and_pattern() {
        let err = Profile::custom(CustomProfile {
            allow: vec![],
            ask: vec!["ok".into()],
            deny: vec!["fine".into(), "bad(".into()],
            shell_tools: vec![],
            approvals: vec![],
            examples: Default::default(),
            max_per_hour: None,
            rule_limits: Vec::new(),
            taints: Vec::new(),
            guarded: Vec::new(),
        })
        .unwrap_err();
        let ProfileError::InvalidPattern {
            list,
            index,
            pattern,
            ..
        } = &err
        else {
            panic!("wrong error {err:?}");
        };
        assert_eq!(
            (*list, *index, pattern.as_str()),
            (ListKind::Deny, 1, "bad(")
        );
        let text = err.to_string();
        assert!(
            text.contains("deny") && text.contains("#1") && text.contains("bad("),
            "{text}"
        );
    }

    #[test]
    fn shell_tools_extend_the_defaults() {
        let p = Profile::custom(CustomProfile {
            shell_tools: vec!["Bash".into()],
            approvals: vec![],
            examples: Default::default(),
            max_per_hour: None,
            rule_limits: Vec::new(),
            taints: Vec::new(),
            guarded: Vec::new(),
            ..CustomProfile::default()
        })
        .unwrap();
        assert!(p.is_shell_tool("bash") && p.is_shell_tool("sh") && p.is_shell_tool("Bash"));
        assert!(!p.is_shell_tool("zsh"));
    }

    #[test]
    fn unknown_field_is_rejected() {
        let r: Result<ProfileSpec, _> = serde_json::from_str(r#"{"allow":[],"ask":[],"alow":[]}"#);
        assert!(r.is_err());
    }

    #[test]
    fn profile_errors_name_the_field_and_the_problem() {
        let err = |json: &str| {
            serde_json::from_str::<ProfileSpec>(json)
                .unwrap_err()
                .to_string()
        };
        let e = err(r#"{"allow":[],"ask":[],"aprovals":[]}"#);
        assert!(e.starts_with("unknown field `aprovals`"), "{e}");
        assert!(e.contains("in profile"), "{e}");
        let e = err(r#"{"ask":[]}"#);
        assert!(e.starts_with("missing field `allow` in profile"), "{e}");
        let e = err(r#"{"allow":"x","ask":[]}"#);
        assert!(
            e.contains("invalid type: string \"x\", expected a sequence"),
            "{e}"
        );
        let e = err("3");
        assert!(e.contains("expected a preset name or an object"), "{e}");
        for e in [e, err(r#"{"allow":[],"ask":[],"aprovals":[]}"#)] {
            assert!(!e.contains("untagged"), "{e}");
        }
        // Both forms still read, and a `Profile` reads through them.
        assert_eq!(
            serde_json::from_str::<ProfileSpec>(r#""standard""#).unwrap(),
            ProfileSpec::Preset("standard".into())
        );
        let p: Profile = serde_json::from_str(r#"{"allow":["x"],"ask":[]}"#).unwrap();
        assert!(matches!(p.spec(), ProfileSpec::Custom(_)));
        let e = serde_json::from_str::<Profile>(r#"{"allow":[],"ask":[],"aprovals":[]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("unknown field `aprovals`"), "{e}");
    }

    #[test]
    fn builtin_tool_names_are_recognized_in_any_case() {
        for name in ["git", "GIT", "file", "bash", "Sh", "webfetch", "Read"] {
            assert!(is_builtin_tool(name), "{name}");
        }
        for name in ["fs", "github", "gitx", "files", ""] {
            assert!(!is_builtin_tool(name), "{name}");
        }
    }
}
