//! Approval rules of a profile (or of a handler action): how many distinct
//! people must approve an asked action, who may decide it, and when to
//! escalate it. Pure: matching only, no people or time are looked up here.

use serde::{Deserialize, Serialize};

/// The most approvals a rule may ask for.
pub const MAX_COUNT: u32 = 10;

/// The most entries of a rule's `approvers`.
pub const MAX_APPROVERS: usize = 32;

/// One rule of a profile's `approvals` list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRule {
    /// A regex that must match the whole action string.
    pub pattern: String,
    /// How many distinct people must approve (1 to [`MAX_COUNT`]).
    #[serde(default = "one")]
    pub count: u32,
    /// Who may decide: globs over the names of people and of operator
    /// keys (`release-*`), or `group:<name>`. Empty: any operator.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// With no decision this long after the request (`30m`, `2h`, a
    /// number of seconds and a unit s/m/h/d/w), the action is escalated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_after: Option<String>,
    /// The group whose people are told when the action is escalated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_to: Option<String>,
}

fn one() -> u32 {
    1
}

/// Why an approval rule cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid approvals rule #{index}: {message}")]
pub struct ApprovalRuleError {
    /// Its position in the list, from 0.
    pub index: usize,
    /// What is wrong.
    pub message: String,
}

/// An approval rule with its pattern compiled.
#[derive(Debug, Clone)]
pub struct CompiledRule {
    /// The rule as written.
    pub rule: ApprovalRule,
    /// Its position in the list it came from.
    pub index: usize,
    /// Where it comes from when not a profile's list (a handler action's
    /// `approvals`), for errors.
    pub origin: Option<String>,
    regex: regex::Regex,
    /// The same pattern as a lazy DFA, built on first need, for
    /// [`CompiledRule::may_match_from`]; `None` inside when it cannot be.
    prefix_dfa: std::sync::OnceLock<Option<regex_automata::hybrid::dfa::DFA>>,
}

impl CompiledRule {
    /// Whether the rule covers `action` (the whole string must match).
    pub fn matches(&self, action: &str) -> bool {
        self.regex.is_match(action)
    }

    /// Whether some action string starting with `prefix` could match the
    /// rule: `tool:bash:rm( .*)?` may match from `tool:bash:`, not from
    /// `tool:deploy:`. For an action whose programs the analyser cannot
    /// name (`$RM -rf x`): every rule that may match what it could be
    /// governs it. Fails closed: true when the answer is not known (the
    /// pattern needs what a lazy DFA cannot do, or its cache gave up).
    pub fn may_match_from(&self, prefix: &str) -> bool {
        use regex_automata::{Anchored, Input};
        let Some(dfa) = self
            .prefix_dfa
            .get_or_init(|| regex_automata::hybrid::dfa::DFA::new(self.regex.as_str()).ok())
        else {
            return true;
        };
        let mut cache = dfa.create_cache();
        let input = Input::new(prefix).anchored(Anchored::Yes);
        let Ok(mut state) = dfa.start_state_forward(&mut cache, &input) else {
            return true;
        };
        for &b in prefix.as_bytes() {
            match dfa.next_state(&mut cache, state, b) {
                Ok(next) if next.is_dead() => return false,
                Ok(next) if next.is_quit() => return true,
                Ok(next) => state = next,
                Err(_) => return true,
            }
        }
        true
    }

    /// How errors name it: `approvals rule #0 (pattern `…`)`, or its origin.
    pub fn label(&self) -> String {
        match &self.origin {
            Some(o) => o.clone(),
            None => format!(
                "approvals rule #{} (pattern `{}`)",
                self.index, self.rule.pattern
            ),
        }
    }

    /// `escalate_after` in seconds, when set.
    pub fn escalate_after_secs(&self) -> Option<u64> {
        self.rule
            .escalate_after
            .as_deref()
            .and_then(|s| parse_span(s).ok())
    }
}

/// Checks and compiles `rules` in order; the error names the first bad one.
pub fn compile_rules(rules: &[ApprovalRule]) -> Result<Vec<CompiledRule>, ApprovalRuleError> {
    rules
        .iter()
        .enumerate()
        .map(|(index, rule)| compile_rule(index, rule))
        .collect()
}

/// Checks and compiles one rule (`index` names it in errors).
pub fn compile_rule(index: usize, rule: &ApprovalRule) -> Result<CompiledRule, ApprovalRuleError> {
    let fail = |message: String| ApprovalRuleError { index, message };
    if rule.count == 0 || rule.count > MAX_COUNT {
        return Err(fail(format!("count must be 1 to {MAX_COUNT}")));
    }
    if rule.approvers.len() > MAX_APPROVERS {
        return Err(fail(format!("approvers: at most {MAX_APPROVERS} entries")));
    }
    for a in &rule.approvers {
        let name = a.strip_prefix("group:").unwrap_or(a);
        if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
            return Err(fail(format!(
                "approvers: `{a}` must be a glob or group:<name> of 1-128 printable characters"
            )));
        }
    }
    if let Some(after) = &rule.escalate_after {
        parse_span(after).map_err(|m| fail(format!("escalate_after: {m}")))?;
    }
    if let Some(group) = &rule.escalate_to
        && (group.is_empty() || group.len() > 128)
    {
        return Err(fail(
            "escalate_to: a group name of 1-128 characters".to_owned(),
        ));
    }
    if rule.pattern.len() > 4096 {
        return Err(fail("pattern: at most 4096 characters".to_owned()));
    }
    let regex = regex::RegexBuilder::new(&format!("^(?:{})$", rule.pattern))
        .size_limit(1 << 20)
        .build()
        .map_err(|e| fail(format!("pattern `{}`: {e}", rule.pattern)))?;
    Ok(CompiledRule {
        rule: rule.clone(),
        index,
        origin: None,
        regex,
        prefix_dfa: std::sync::OnceLock::new(),
    })
}

use crate::secrets::LINE_BREAKS;

/// A detail that is not analysed, line by line (itself when on one line):
/// `.` stops at a line break, so a newline sent after `prod eu` would shed
/// a rule over `prod.*` (and its count of people). Every character a
/// terminal, a page or a chat may show as a new line starts one, so what a
/// human reads as `prod eu` on a line of its own is governed as such.
pub(crate) fn lines(detail: &str) -> impl Iterator<Item = &str> {
    let many = detail.contains(LINE_BREAKS);
    detail.split(LINE_BREAKS).filter(move |_| many)
}

/// `command` (as the analyser renders it: program, then arguments) with
/// its program called by name rather than by path (`/bin/rm -rf x` is
/// `rm -rf x`); `None` when no path names it.
pub(crate) fn by_program_name(command: &str) -> Option<String> {
    let (program, rest) = match command.split_once(' ') {
        Some((p, r)) => (p, Some(r)),
        None => (command, None),
    };
    let (_, name) = program.rsplit_once('/')?;
    if name.is_empty() {
        return None;
    }
    Some(match rest {
        Some(r) => format!("{name} {r}"),
        None => name.to_owned(),
    })
}

/// How far into a command a program run by an unknown wrapper is looked
/// for ([`spellings`]).
const WRAPPED_WORDS: usize = 8;

/// The forms of one command (as the analyser renders it) an approvals
/// rule is matched against: itself, its program called by name rather than
/// by path, and what follows each of its first [`WRAPPED_WORDS`] words
/// (`chronic rm -rf x` is also `rm -rf x`: a wrapper the analyser does not
/// know, `firejail`, `nix-shell`, `npx`, still runs the program after it;
/// `git rm x` so meets a rule over `rm` too, the safe side).
pub(crate) fn spellings(command: &str) -> Vec<String> {
    let mut out = vec![command.to_owned()];
    out.extend(by_program_name(command));
    let mut rest = command;
    for _ in 0..WRAPPED_WORDS {
        let Some((_, after)) = rest.split_once(' ') else {
            break;
        };
        rest = after.trim_start_matches(['\'', '"']);
        if rest.is_empty() {
            break;
        }
        out.push(rest.to_owned());
        out.extend(by_program_name(rest));
    }
    out
}

/// Whether the analysis cannot name every program the line runs: a line
/// it could not read (unparsable, too deep, too long), a command named by
/// an expansion, a substitution or a pattern (`$RM`, `"$(echo rm)"`,
/// `/bin/r?`, `rm${IFS}-rf`), a program name holding anything but
/// letters, digits and `._+-/@%:,=~`, or a command that runs another
/// whose text the analyser could not read (`bash -c "$X"`, `eval "$X"`).
/// A rule over `rm` cannot be matched against such a line, so every rule
/// that may govern its tool does.
pub(crate) fn unclear_programs(analysis: &crate::shell::ShellAnalysis) -> bool {
    unclear_within(analysis, 2)
}

/// [`unclear_programs`], reading the commands a wrapper runs (`sudo rm`,
/// `xargs sh -c {}`) `depth` levels down.
fn unclear_within(analysis: &crate::shell::ShellAnalysis, depth: usize) -> bool {
    use crate::shell::Hazard;
    let plain = |c: char| seen_letter(c) || "._+-/@%:,=~".contains(c);
    let mut runs = false;
    for h in &analysis.hazards {
        match h {
            // What the program is told, not which program runs.
            Hazard::Network { .. }
            | Hazard::NotGit { .. }
            | Hazard::DynamicArgument { .. }
            | Hazard::GlobArgument { .. }
            | Hazard::FileRedirect { .. }
            | Hazard::PathCommandName { .. }
            | Hazard::ComplexExpansion { .. }
            | Hazard::CommandSubstitution
            | Hazard::ProcessSubstitution => {}
            // Runs a file's content (`.`, `source`): nothing names it.
            Hazard::RunsCommand { command } if command == "." || command == "source" => {
                return true;
            }
            Hazard::RunsCommand { .. } => runs = true,
            // Anything else may run a program the line does not name
            // (an alias, `hash -p`, a function, `sed e`, awk's `system`,
            // `GIT_PAGER=…`, a git alias, zsh's glob qualifiers) or
            // could not be read.
            _ => return true,
        }
    }
    if analysis
        .commands
        .iter()
        .chain(&analysis.hidden)
        .any(|c| !c.split(' ').next().unwrap_or("").chars().all(plain))
    {
        return true;
    }
    // A wrapper runs what the analyser found buried in it: each such
    // command must be as clear, and there must be one.
    runs && (analysis.hidden.is_empty()
        || depth == 0
        || analysis
            .hidden
            .iter()
            .any(|c| unclear_within(&crate::shell::analyze_shell(c), depth - 1)))
}

/// Whether a detail that is not analysed may read otherwise than it
/// matches: it starts or ends with white space, or holds a character
/// that is neither a letter or digit of any script nor printable ASCII
/// (a zero-width space, a bidi override, a no-break space, a soft
/// hyphen): `p\u{200b}rod eu` reads `prod eu` but no rule over `prod.*`
/// matches it, so every rule that may govern its tool does.
pub(crate) fn unclear_detail(detail: &str) -> bool {
    detail.starts_with(char::is_whitespace)
        || detail.ends_with(char::is_whitespace)
        || detail.chars().any(|c| {
            look_alike(c)
                || !(seen_letter(c) || c == ' ' || c.is_ascii_graphic() || LINE_BREAKS.contains(&c))
        })
}

/// A letter of a script or block whose letters pass for Latin ones
/// (Cyrillic `р`, Greek `ο`, Armenian, Cherokee, fullwidth `ｐ`, letterlike
/// and mathematical forms): `рrоd eu` reads `prod eu` but no rule over
/// `prod.*` matches it.
fn look_alike(c: char) -> bool {
    matches!(u32::from(c),
        0x0370..=0x058F | 0x13A0..=0x13FF | 0x1D00..=0x1DBF | 0x2100..=0x214F
        | 0x2460..=0x24FF | 0xFF00..=0xFFEF | 0x1D400..=0x1D7FF)
}

/// A letter or digit of any script that is drawn as something: not the
/// Hangul fillers, which are letters drawn as nothing.
fn seen_letter(c: char) -> bool {
    c.is_alphanumeric() && !matches!(c, '\u{115f}' | '\u{1160}' | '\u{3164}' | '\u{ffa0}')
}

/// Parses `30s`, `15m`, `2h`, `1d`, `1w` (1 to 9999 units) into seconds.
pub fn parse_span(s: &str) -> Result<u64, String> {
    let bad = || format!("`{s}` is not a span like 30s, 15m, 2h, 1d or 1w");
    let unit = s.chars().last().ok_or_else(bad)?;
    let n: u64 = s[..s.len() - unit.len_utf8()].parse().map_err(|_| bad())?;
    if n == 0 || n > 9999 {
        return Err(bad());
    }
    let mult = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        'w' => 604_800,
        _ => return Err(bad()),
    };
    Ok(n * mult)
}

/// Who is deciding, as approver rules see them: a name (a person's, or an
/// operator key's, or a chat identity's) and the person's groups.
#[derive(Debug, Clone, Copy)]
pub struct Approver<'a> {
    /// Names the globs are matched against (a person's name, and the
    /// key's name it uses).
    pub names: &'a [String],
    /// The person's groups (none for a key or identity of nobody's).
    pub groups: &'a [String],
}

/// Whether `who` may decide under `approvers` (empty: anyone may).
pub fn approver_allowed(approvers: &[String], who: Approver<'_>) -> bool {
    approvers.is_empty()
        || approvers.iter().any(|a| match a.strip_prefix("group:") {
            Some(group) => who.groups.iter().any(|g| g == group),
            None => who.names.iter().any(|n| glob_match(a, n)),
        })
}

/// A glob where `*` matches any run of characters and `?` one character;
/// everything else matches itself.
pub fn glob_match(glob: &str, text: &str) -> bool {
    let g: Vec<char> = glob.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut gi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if gi < g.len() && (g[gi] == '?' || (g[gi] != '*' && g[gi] == t[ti])) {
            gi += 1;
            ti += 1;
        } else if gi < g.len() && g[gi] == '*' {
            star = Some((gi, ti));
            gi += 1;
        } else if let Some((sg, st)) = star {
            gi = sg + 1;
            ti = st + 1;
            star = Some((sg, st + 1));
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rule(pattern: &str, count: u32) -> ApprovalRule {
        ApprovalRule {
            pattern: pattern.into(),
            count,
            approvers: vec![],
            escalate_after: None,
            escalate_to: None,
        }
    }

    #[test]
    fn pattern_must_match_the_whole_action() {
        let c = compile_rule(0, &rule("tool:deploy:prod.*", 2)).unwrap();
        assert!(c.matches("tool:deploy:prod eu"));
        assert!(!c.matches("x tool:deploy:prod eu"));
        assert!(!c.matches("tool:deploy:staging"));
    }

    #[test]
    fn bad_rules_are_refused_naming_what() {
        let e = compile_rule(3, &rule(".*", 0)).unwrap_err();
        assert_eq!(e.index, 3);
        assert!(e.message.contains("count"));
        assert!(compile_rule(0, &rule("(", 1)).is_err());
        let mut r = rule(".*", 1);
        r.escalate_after = Some("soon".into());
        assert!(
            compile_rule(0, &r)
                .unwrap_err()
                .message
                .contains("escalate_after")
        );
    }

    #[test]
    fn spans_parse() {
        assert_eq!(parse_span("30s"), Ok(30));
        assert_eq!(parse_span("2h"), Ok(7200));
        assert!(parse_span("0m").is_err());
        assert!(parse_span("h").is_err());
        assert!(parse_span("5x").is_err());
    }

    #[test]
    fn approvers_match_names_by_glob_and_groups_exactly() {
        let rules = vec!["release-*".to_owned(), "group:dba".to_owned()];
        let names = vec!["release-ann".to_owned()];
        let none: Vec<String> = vec![];
        assert!(approver_allowed(
            &rules,
            Approver {
                names: &names,
                groups: &none
            }
        ));
        let bob = vec!["bob".to_owned()];
        assert!(!approver_allowed(
            &rules,
            Approver {
                names: &bob,
                groups: &none
            }
        ));
        let dba = vec!["dba".to_owned()];
        assert!(approver_allowed(
            &rules,
            Approver {
                names: &bob,
                groups: &dba
            }
        ));
        let dbas = vec!["dbas".to_owned()];
        assert!(!approver_allowed(
            &rules,
            Approver {
                names: &bob,
                groups: &dbas
            }
        ));
        assert!(approver_allowed(
            &[],
            Approver {
                names: &bob,
                groups: &none
            }
        ));
    }

    #[test]
    fn globs() {
        assert!(glob_match("a*c", "abbbc"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "abbc"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("release-*", "releasex"));
    }
}
