//! The decision: deny pattern > active grant > allow pattern > ask pattern >
//! deny, judged per simple command for shell tools (the strictest answer
//! wins), with shell hazards capping the answer at ask.

use crate::grant::{Grant, GrantTarget, Request};
use crate::pattern::{PatternSet, SetMatch};
use crate::profile::{Profile, ShellShortcut, format_action, split_action};
use crate::shell::{Dialect, Hazard, ShellAnalysis, analyze, git_simple_hazard, simple_hazard};
use crate::verdict::{ListKind, Verdict};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;

/// What decided an action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Rule {
    /// A profile pattern. For a deny caused by a look-around pattern hitting
    /// the backtracking limit, this names that pattern (in whatever list).
    Pattern {
        /// The list holding it.
        list: ListKind,
        /// Its position in the list, from 0.
        index: usize,
        /// The pattern as written.
        pattern: String,
    },
    /// A grant.
    Grant {
        /// The grant's id.
        id: String,
    },
    /// Nothing matched: denied by default.
    Default,
}

/// A verdict with its explanation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The answer.
    pub verdict: Verdict,
    /// Why, as a sentence for humans.
    pub reason: String,
    /// What decided it.
    pub rule: Option<Rule>,
}

/// The verdict of `profile` for a full action string `tool:<tool>:<detail>`.
///
/// Shell tools of the profile are judged per simple command, as in
/// [`decide`]; there are no grants here.
///
/// Where parsing cannot change the verdict (see `ShellShortcut`), a shell
/// action is judged as one string without parsing it: `guarded` asks for
/// every `bash` action and `standard` for every single-line one whatever
/// the command. [`decide`] always parses, since its reason names the
/// command that decided.
pub fn check(action: &str, profile: &Profile) -> Verdict {
    check_with(action, profile, true)
}

/// [`check`], with or without the shortcut (tests compare the two).
pub(crate) fn check_with(action: &str, profile: &Profile, shortcut: bool) -> Verdict {
    let (tool, detail) = split_action(action).unwrap_or(("", action));
    let ctx = Context {
        profile,
        grants: &[],
        permission_grant: None,
        agent: "",
        tool,
        now: None,
        exact: false,
        single_line: false,
        dialect: profile.dialect(tool).unwrap_or(Dialect::Bash),
        used: None,
    };
    let kind = if tool.is_empty() {
        None
    } else {
        profile.shell_shortcut(tool)
    };
    let parse = match kind {
        None => false,
        Some(_) if !shortcut => true,
        Some(ShellShortcut::Always) => false,
        Some(ShellShortcut::WithoutNewline) => detail.contains('\n'),
        Some(ShellShortcut::Never) => true,
    };
    let verdict = if parse {
        ctx.shell_verdict(action, detail)
    } else {
        ctx.verdict(action)
    };
    debug_assert_eq!(
        verdict,
        if parse {
            ctx.shell(action, detail).verdict
        } else {
            ctx.plain(action, detail).verdict
        }
    );
    verdict
}

/// Decides `req` for an agent with `profile` and `grants` at `now`, saying why.
pub fn decide(
    profile: &Profile,
    grants: &[Grant],
    req: &Request<'_>,
    now: DateTime<Utc>,
) -> Decision {
    decide_crediting(profile, grants, req, now).0
}

/// [`decide`], and the ids of the grants that allowed a part of `req` (the
/// whole of it, a line's simple command, a handler's permission): when the
/// decision is an allow that rests on grants, the ones it rests on, and
/// none of the others of the list.
pub fn decide_crediting(
    profile: &Profile,
    grants: &[Grant],
    req: &Request<'_>,
    now: DateTime<Utc>,
) -> (Decision, Vec<String>) {
    let used = RefCell::new(Vec::new());
    let action = format_action(req.tool, req.detail);
    let permission_grant = req.permission.and_then(|_| {
        grants
            .iter()
            .find(|g| g.is_active(now) && g.applies_to(req.agent) && g.covers_permission(req))
    });
    let ctx = Context {
        profile,
        // Tool grants are for decision-only actions; a handler action is
        // allowed by a grant of its permission alone (`permission_grant`).
        grants: if req.permission.is_some() {
            &[]
        } else {
            grants
        },
        permission_grant,
        agent: req.agent,
        tool: req.tool,
        now: Some(now),
        exact: true,
        single_line: false,
        dialect: profile.dialect(req.tool).unwrap_or(Dialect::Bash),
        used: Some(&used),
    };
    let outcome = if profile.dialect(req.tool).is_some() {
        ctx.shell(&action, req.detail)
    } else if let Some((prefix, command)) = shell_part(req) {
        ctx.shell_in(&action, prefix, command)
    } else {
        ctx.plain(&action, req.detail)
    };
    (outcome.into_decision(profile), used.into_inner())
}

/// A handler action whose scope has a shell command line
/// ([`crate::grant::SHELL_SCOPE_KEY`]) that ends its detail (as in
/// `execute_command {content}`): the detail split into what comes before
/// the command and the command, so the command is judged like a shell
/// tool's.
fn shell_part<'r>(req: &Request<'r>) -> Option<(&'r str, &'r str)> {
    let command = req
        .permission?
        .scope
        .get(crate::grant::SHELL_SCOPE_KEY)?
        .as_str()?;
    let prefix = req.detail.strip_suffix(command)?;
    Some((prefix, &req.detail[prefix.len()..]))
}

/// Where a segment's answer came from.
#[derive(Debug, Clone, Copy)]
enum Source<'g> {
    Pattern(ListKind, usize),
    /// A look-around pattern ran out of backtracking steps.
    Limit(ListKind, usize),
    Grant(&'g Grant),
    /// A grant's look-around pattern ran out of backtracking steps.
    GrantLimit(&'g Grant),
    Default,
}

#[derive(Debug, Clone)]
struct Outcome<'g> {
    verdict: Verdict,
    source: Source<'g>,
    /// The simple command that decided, for shell tools.
    command: Option<String>,
    /// The hazard that lowered an allow to ask.
    capped_by: Option<Hazard>,
}

impl<'g> Outcome<'g> {
    fn new(verdict: Verdict, source: Source<'g>) -> Self {
        Outcome {
            verdict,
            source,
            command: None,
            capped_by: None,
        }
    }

    fn into_decision(self, profile: &Profile) -> Decision {
        let pattern = |list: ListKind, index: usize| profile.list(list).pattern(index).to_owned();
        let on = match &self.command {
            Some(command) => format!(" (command `{command}`)"),
            None => String::new(),
        };
        let (rule, mut reason) = match self.source {
            Source::Pattern(list, index) => {
                let p = pattern(list, index);
                let reason = match list {
                    ListKind::Deny => format!("denied by deny pattern #{index} `{p}`{on}"),
                    ListKind::Allow => format!("allowed by allow pattern #{index} `{p}`{on}"),
                    ListKind::Ask => {
                        format!("ask pattern #{index} `{p}` matched{on}; a human must decide")
                    }
                };
                (
                    Rule::Pattern {
                        list,
                        index,
                        pattern: p,
                    },
                    reason,
                )
            }
            Source::Limit(list, index) => {
                let p = pattern(list, index);
                let reason = format!(
                    "{list} pattern #{index} `{p}` exceeded the backtracking limit on this input{on}; denied because its answer is unknown"
                );
                (
                    Rule::Pattern {
                        list,
                        index,
                        pattern: p,
                    },
                    reason,
                )
            }
            Source::Grant(grant) => (
                Rule::Grant {
                    id: grant.id.clone(),
                },
                format!("allowed by grant `{}`{on}", grant.id),
            ),
            Source::GrantLimit(grant) => (
                Rule::Grant {
                    id: grant.id.clone(),
                },
                format!(
                    "the pattern of grant `{}` exceeded the backtracking limit on this input{on}; denied because its answer is unknown",
                    grant.id
                ),
            ),
            Source::Default => (
                Rule::Default,
                format!("no allow or ask pattern matched{on}; denied by default"),
            ),
        };
        if let Some(hazard) = &self.capped_by {
            reason = format!("{reason}, but {hazard}; a human must decide");
        }
        Decision {
            verdict: self.verdict,
            reason,
            rule: Some(rule),
        }
    }
}

/// Everything one decision needs, so each segment is judged the same way.
#[derive(Clone, Copy)]
struct Context<'p, 'g> {
    profile: &'p Profile,
    grants: &'g [Grant],
    /// An active grant covering the handler permission the action needs.
    permission_grant: Option<&'g Grant>,
    agent: &'p str,
    tool: &'p str,
    /// `None` when there are no grants to consult.
    now: Option<DateTime<Utc>>,
    /// Whether the index of the matching pattern matters (for `decide`),
    /// or any witness will do (for `check`).
    exact: bool,
    /// The action strings judged are known to hold no `\n`, so the
    /// pattern lists need not look for one.
    single_line: bool,
    /// How a shell tool's detail (or a handler's command) is read.
    dialect: Dialect,
    /// Where the ids of the grants that allowed a part are written, when
    /// the caller wants them ([`decide_crediting`]).
    used: Option<&'p RefCell<Vec<String>>>,
}

impl<'g> Context<'_, 'g> {
    /// An allow by `grant`, its id written down where the caller asked.
    fn allowed_by(&self, grant: &'g Grant) -> Outcome<'g> {
        if let Some(used) = self.used {
            let mut used = used.borrow_mut();
            if !used.contains(&grant.id) {
                used.push(grant.id.clone());
            }
        }
        Outcome::new(Verdict::Allow, Source::Grant(grant))
    }

    fn find(&self, list: &PatternSet, input: &str) -> SetMatch {
        if list.is_empty() {
            SetMatch::None
        } else if self.exact {
            list.first_match_in(input, self.single_line)
        } else {
            list.matches_any_in(input, self.single_line)
        }
    }

    fn deny_pass(&self, action: &str) -> Option<Outcome<'g>> {
        match self.find(self.profile.list(ListKind::Deny), action) {
            SetMatch::None => None,
            SetMatch::Matched(i) => Some(Outcome::new(
                Verdict::Deny,
                Source::Pattern(ListKind::Deny, i),
            )),
            SetMatch::LimitExceeded(i) => Some(Outcome::new(
                Verdict::Deny,
                Source::Limit(ListKind::Deny, i),
            )),
        }
    }

    /// Judges one action string (a whole non-shell action, or one simple
    /// command of a shell action) after the deny pass: grants, then
    /// allow, then ask, then deny.
    fn judge(&self, action: &str, detail: &str) -> Outcome<'g> {
        if let Some(grant) = self.permission_grant {
            return self.allowed_by(grant);
        }
        if let Some(now) = self.now {
            for grant in self.grants {
                let GrantTarget::Tool(pattern) = &grant.target else {
                    continue;
                };
                // A whole line's grant is for the line ([`Context::line_grant`]).
                if pattern.is_whole_line()
                    || pattern.tool() != self.tool
                    || !grant.applies_to(self.agent)
                    || !grant.is_active(now)
                {
                    continue;
                }
                match pattern.matches(detail) {
                    SetMatch::Matched(_) => return self.allowed_by(grant),
                    SetMatch::LimitExceeded(_) => {
                        return Outcome::new(Verdict::Deny, Source::GrantLimit(grant));
                    }
                    SetMatch::None => {}
                }
            }
        }
        for (list, verdict) in [
            (ListKind::Allow, Verdict::Allow),
            (ListKind::Ask, Verdict::Ask),
        ] {
            match self.find(self.profile.list(list), action) {
                SetMatch::Matched(i) => return Outcome::new(verdict, Source::Pattern(list, i)),
                SetMatch::LimitExceeded(i) => {
                    return Outcome::new(Verdict::Deny, Source::Limit(list, i));
                }
                SetMatch::None => {}
            }
        }
        Outcome::new(Verdict::Deny, Source::Default)
    }

    /// What [`Context::plain`] answers when there are no grants (as for
    /// [`check`]), without building an [`Outcome`]: the first list that
    /// matches decides, a backtracking limit denies. (`check_with` checks
    /// in debug builds that the two agree.)
    fn verdict(&self, action: &str) -> Verdict {
        debug_assert!(self.grants.is_empty() && self.permission_grant.is_none());
        for (list, verdict) in [
            (ListKind::Deny, Verdict::Deny),
            (ListKind::Allow, Verdict::Allow),
            (ListKind::Ask, Verdict::Ask),
        ] {
            match self.find(self.profile.list(list), action) {
                SetMatch::Matched(_) => return verdict,
                SetMatch::LimitExceeded(_) => return Verdict::Deny,
                SetMatch::None => {}
            }
        }
        Verdict::Deny
    }

    /// A non-shell action: one string, deny pass included.
    fn plain(&self, action: &str, detail: &str) -> Outcome<'g> {
        self.deny_pass(action)
            .or_else(|| self.line_grant(detail))
            .unwrap_or_else(|| self.judge(action, detail))
    }

    /// The answer of the first active grant of a whole line
    /// ([`crate::ToolPattern::is_whole_line`]) whose pattern matches `detail`,
    /// the whole detail as sent; judged after the deny pass.
    fn line_grant(&self, detail: &str) -> Option<Outcome<'g>> {
        let now = self.now?;
        self.grants.iter().find_map(|grant| {
            let GrantTarget::Tool(pattern) = &grant.target else {
                return None;
            };
            if !pattern.is_whole_line()
                || pattern.tool() != self.tool
                || !grant.applies_to(self.agent)
                || !grant.is_active(now)
            {
                return None;
            }
            match pattern.matches(detail) {
                SetMatch::Matched(_) => Some(self.allowed_by(grant)),
                SetMatch::LimitExceeded(_) => {
                    Some(Outcome::new(Verdict::Deny, Source::GrantLimit(grant)))
                }
                SetMatch::None => None,
            }
        })
    }

    /// A shell action `action` = `tool:<self.tool>:<detail>`: analyzed
    /// once, then every simple command judged against every list; the
    /// strictest answer wins and hazards cap it.
    fn shell(&self, action: &str, detail: &str) -> Outcome<'g> {
        debug_assert_eq!(action, format_action(self.tool, detail));
        // One command written canonically (`ls -la src`) is its own only
        // segment: the action string is judged as it is, as `plain` does,
        // and only the hazard remains to apply.
        if let Some(hazard) = self.simple_hazard(detail) {
            let mut outcome = self.single_line().plain(action, detail);
            if let (Verdict::Allow, Some(hazard)) = (outcome.verdict, hazard) {
                outcome.verdict = Verdict::Ask;
                outcome.capped_by = Some(hazard);
            }
            return outcome;
        }
        self.shell_in(action, "", detail)
    }

    /// [`Context::shell`]'s verdict when there are no grants, as
    /// [`Context::verdict`] is [`Context::plain`]'s.
    fn shell_verdict(&self, action: &str, detail: &str) -> Verdict {
        debug_assert_eq!(action, format_action(self.tool, detail));
        match self.simple_hazard(detail) {
            Some(hazard) => match self.single_line().verdict(action) {
                Verdict::Allow if hazard.is_some() => Verdict::Ask,
                verdict => verdict,
            },
            None => self.shell_in(action, "", detail).verdict,
        }
    }

    /// For a detail that is its own only command in canonical form, the
    /// first hazard of its analysis; `None` if it is not of that form.
    fn simple_hazard(&self, detail: &str) -> Option<Option<Hazard>> {
        if detail.len() > crate::shell::MAX_LEN {
            // Judged as one string, as the analysis would leave it. (The
            // separator bound needs no test here: the simple form holds
            // no separator.)
            return Some(Some(Hazard::TooLong));
        }
        match self.dialect {
            Dialect::Git => git_simple_hazard(detail),
            Dialect::Bash | Dialect::Sh => simple_hazard(detail),
        }
    }

    /// This context for the action of a command that [`simple_hazard`]
    /// took: such a command holds no newline, so the action
    /// `tool:<tool>:<command>` holds one only in the tool's name.
    fn single_line(&self) -> Self {
        Context {
            single_line: !self.tool.bytes().any(|b| b == b'\n'),
            ..*self
        }
    }

    /// [`Context::shell`] for a detail made of `prefix` and a shell
    /// `command`: each simple command is judged as
    /// `tool:<tool>:<prefix><command>`.
    fn shell_in(&self, action: &str, prefix: &str, command: &str) -> Outcome<'g> {
        let command_input = command;
        let analysis = analyze(self.dialect, command);
        let segments = segments(self.tool, prefix, action, &analysis);
        // Deny patterns see the whole string and every command.
        if let Some(outcome) = self.deny_pass(action) {
            return outcome;
        }
        for (segment, command) in &segments {
            if let Some(mut outcome) = self.deny_pass(segment) {
                outcome.command = Some((*command).to_owned());
                return outcome;
            }
        }
        // Commands hidden where the walk does not look are shown to deny
        // patterns alone (the line has a hazard, so it is never allowed).
        for command in &analysis.hidden {
            let segment = format_action(self.tool, &format!("{prefix}{command}"));
            if let Some(mut outcome) = self.deny_pass(&segment) {
                outcome.command = Some(command.clone());
                return outcome;
            }
        }
        // A whole line's grant allows the line as sent (a handler's
        // command, after its prefix, has no tool grants).
        if prefix.is_empty()
            && let Some(mut outcome) = self.line_grant(command_input)
        {
            if let (Verdict::Allow, Some(hazard)) = (outcome.verdict, analysis.hazards.first()) {
                outcome.verdict = Verdict::Ask;
                outcome.capped_by = Some(hazard.clone());
            }
            return outcome;
        }
        let mut worst: Option<Outcome<'g>> = None;
        for (segment, command) in &segments {
            // Tool grants see the segment's whole detail (with the prefix).
            let detail = split_action(segment).map_or(*command, |(_, d)| d);
            let mut outcome = self.judge(segment, detail);
            // The reason (and so the audit) names the command judged when
            // it is not the detail as sent: one of several, or the
            // canonical form (`push origin main` for ` 'push'  origin main`).
            if segments.len() > 1 || *command != command_input {
                outcome.command = Some((*command).to_owned());
            }
            let replace = match &worst {
                None => true,
                Some(w) => {
                    outcome.verdict > w.verdict
                        // Among allows, report a grant: it is what made the difference.
                        || (outcome.verdict == w.verdict
                            && matches!(outcome.source, Source::Grant(_))
                            && !matches!(w.source, Source::Grant(_)))
                }
            };
            if replace {
                worst = Some(outcome);
            }
            if worst.as_ref().is_some_and(|w| w.verdict == Verdict::Deny) {
                break;
            }
        }
        let mut outcome = worst.unwrap_or_else(|| Outcome::new(Verdict::Deny, Source::Default));
        if let (Verdict::Allow, Some(hazard)) = (outcome.verdict, analysis.hazards.first()) {
            outcome.verdict = Verdict::Ask;
            outcome.capped_by = Some(hazard.clone());
        }
        outcome
    }
}

/// The action strings to judge for a shell action, each with its command:
/// one per simple command, or the whole action if there is none (an empty
/// or unparsable command).
fn segments<'a>(
    tool: &str,
    prefix: &str,
    action: &'a str,
    analysis: &'a ShellAnalysis,
) -> Vec<(std::borrow::Cow<'a, str>, &'a str)> {
    if analysis.commands.is_empty() {
        let detail = split_action(action).map_or(action, |(_, d)| d);
        return vec![(std::borrow::Cow::Borrowed(action), detail)];
    }
    analysis
        .commands
        .iter()
        .map(|command| {
            let segment = if prefix.is_empty() {
                format_action(tool, command)
            } else {
                format_action(tool, &format!("{prefix}{command}"))
            };
            (std::borrow::Cow::Owned(segment), command.as_str())
        })
        .collect()
}

#[cfg(test)]
mod shortcut_tests;
