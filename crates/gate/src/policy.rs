//! Running the policy for a caller: their profile, their grants, now.

use actiongate_policy as policy;
use actiongate_policy::approvals::CompiledRule;
use actiongate_store::{Decision, DecisionResult};
use serde_json::{Map, Value};

use crate::Gate;
use crate::error::GateError;

/// Characters allowed in a tool name. A colon would let a tool name smuggle
/// part of a detail into `tool:<tool>:<detail>` and match other patterns.
pub fn validate_tool(tool: &str) -> Result<(), GateError> {
    let ok = !tool.is_empty()
        && tool.len() <= 128
        && tool
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(GateError::invalid(
            "tool",
            "1-128 characters from A-Z a-z 0-9 _ - .",
        ))
    }
}

/// The permission a handler action needs.
pub struct NeededPermission<'a> {
    /// Handler id.
    pub handler: &'a str,
    /// Permission name.
    pub permission: &'a str,
    /// Scope values.
    pub scope: &'a Map<String, Value>,
    /// The action's name and its params as shown (for grants of one call).
    pub call: Option<(&'a str, &'a Value)>,
    /// The handler action's own `approvals`, when it has them.
    pub approvals: Option<&'a CompiledRule>,
    /// Whether it may reach past its handler's own closed domain
    /// (`ActionHints::reaches_out`).
    pub reaches_out: bool,
}

/// Decides `tool:<tool>:<detail>` for `agent` under its profile and its
/// active grants (`permission` set for handler actions).
pub async fn decide(
    gate: &Gate,
    agent: &str,
    tool: &str,
    detail: &str,
    permission: Option<NeededPermission<'_>>,
) -> Result<Decision, GateError> {
    Ok(decide_in(gate, agent, None, tool, detail, permission)
        .await?
        .decision)
}

/// What [`decide_in`] answers.
pub struct Decided {
    /// The decision.
    pub decision: Decision,
    /// The grant with a count of uses that allowed it, whose use the
    /// action takes when it is stored.
    pub take_use: Option<String>,
    /// The grants it was allowed by (when the profile alone would not
    /// allow it), for the store to check are still in force when it
    /// stores the action ([`actiongate_store::actions::NewAction::relies_on`]).
    pub relies_on: Vec<String>,
    /// The approvals rules that govern the action (its profile's rule
    /// whose pattern matches, its handler action's), kept with it when it
    /// is asked (`crate::asked_rules`).
    pub rules: Vec<CompiledRule>,
}

/// The approvals rules that govern an action: the profile's first rule
/// whose pattern matches `action_string`, and each of its commands' first
/// (a handler action's command line, in `scope`, matched command by
/// command), then its handler action's own.
pub(crate) fn governing_rules(
    profile: &policy::Profile,
    action_string: &str,
    scope: Option<&Map<String, Value>>,
    handler_rule: Option<&CompiledRule>,
) -> Vec<CompiledRule> {
    profile
        .approval_rules_for(action_string, scope)
        .into_iter()
        .chain(handler_rule)
        .cloned()
        .collect()
}

/// Why a guarded action asks in `session`, tainted by action `by`.
pub(crate) fn tainted_reason(session: &str, by: &str, what: &str) -> String {
    let by = if by == crate::sessions::UNDECIDED_RUN {
        "a run reported without a decision".to_owned()
    } else {
        format!("action {by}")
    };
    format!("session '{session}' is tainted by {by} (`{what}`): guarded actions ask")
}

/// [`decide`] for an action of `session`: grants scoped to that session or
/// to a count of uses count too (after the unscoped ones, so a standing
/// grant is used before a counted one).
pub async fn decide_in(
    gate: &Gate,
    agent: &str,
    session: Option<&str>,
    tool: &str,
    detail: &str,
    permission: Option<NeededPermission<'_>>,
) -> Result<Decided, GateError> {
    let profile = gate.profile_of(agent).await?;
    let mut grants = gate.store().active_grants(agent, tool).await?;
    let scoped = gate
        .store()
        .scoped_grants(agent, session.map(str::to_owned), tool)
        .await?;
    let counted: Vec<String> = scoped
        .iter()
        .filter(|(_, left)| left.is_some())
        .map(|(g, _)| g.id.clone())
        .collect();
    grants.extend(scoped.into_iter().map(|(g, _)| g));
    let action_string = policy::format_action(tool, detail);
    let reaches_out = permission.as_ref().is_some_and(|p| p.reaches_out);
    let scope = permission.as_ref().map(|p| p.scope);
    let rules = governing_rules(
        &profile,
        &action_string,
        permission.as_ref().map(|p| p.scope),
        permission.as_ref().and_then(|p| p.approvals),
    );
    let req = policy::Request {
        agent,
        tool,
        detail,
        permission: permission.map(|p| policy::PermissionRef {
            handler: p.handler,
            permission: p.permission,
            scope: p.scope,
            call: p.call,
        }),
    };
    let now = chrono::Utc::now();
    let (mut d, credited) = policy::decide_crediting(&profile, &grants, &req, now);
    // An action an approvals rule governs is for its approvers: a grant
    // (one operator's say) does not allow it. What the profile alone
    // allows stays allowed; anything else asks.
    if let (Some(rule), Some(policy::Rule::Grant { id })) = (rules.first(), &d.rule)
        && d.verdict == policy::Verdict::Allow
    {
        let alone = policy::decide(&profile, &[], &req, now);
        d = if alone.verdict == policy::Verdict::Allow {
            alone
        } else {
            policy::Decision {
                verdict: policy::Verdict::Ask,
                reason: format!(
                    "grant {id} covers it, but {} governs it: its approvers decide",
                    rule.label()
                ),
                rule: d.rule.clone(),
            }
        };
    }
    // A way out, in a session that read untrusted content, asks.
    if let Some(session) = session
        && d.verdict == policy::Verdict::Allow
        && profile.way_out_call(&action_string, scope, reaches_out)
        && let Some((by, what)) = gate
            .store()
            .session_taint(session.to_owned(), profile.clone())
            .await?
    {
        d = policy::Decision {
            verdict: policy::Verdict::Ask,
            reason: tainted_reason(session, &by, &what),
            rule: None,
        };
    }
    let take_use = if d.verdict == policy::Verdict::Allow && !counted.is_empty() {
        match counted_use(&profile, &grants, &counted, &req) {
            Some(use_of) => use_of,
            None => {
                return Ok(Decided {
                    decision: Decision {
                        result: DecisionResult::Ask,
                        reason: "its commands would take several counted uses (of several \
                                 grants, or of one for several commands), and an action takes \
                                 one use; a human must decide"
                            .to_owned(),
                        rule: None,
                    },
                    take_use: None,
                    relies_on: Vec::new(),
                    rules,
                });
            }
        }
    } else {
        None
    };
    // The grants it rests on, and only those: another grant of the agent
    // and tool lapsing (an unrelated one expiring, still in the cached
    // list) must not turn it into a question.
    let relies_on = if d.verdict == policy::Verdict::Allow
        && !credited.is_empty()
        && policy::decide(&profile, &[], &req, now).verdict != policy::Verdict::Allow
    {
        credited
    } else {
        Vec::new()
    };
    Ok(Decided {
        decision: record(d),
        take_use,
        relies_on,
        rules,
    })
}

/// Which counted grant an allowed `req` takes a use of: `Some(None)` when
/// the uncounted grants and the profile allow it alone; `Some(Some(id))`
/// for the first counted grant that, with them, covers every simple
/// command; `None` when it takes several counted grants, or one for
/// several of its commands (one action takes one use, so it is asked).
/// Without this, a line whose commands were allowed by an uncounted and a
/// counted grant would report the first and spend nothing.
fn counted_use(
    profile: &policy::Profile,
    grants: &[policy::Grant],
    counted: &[String],
    req: &policy::Request<'_>,
) -> Option<Option<String>> {
    let now = chrono::Utc::now();
    // The uncounted grants once, and each counted one tried in turn in one
    // slot after them: a session may hold thousands of counted grants (a
    // plan's approved steps), each tried against the few others, not all.
    let counted_ids: std::collections::HashSet<&str> = counted.iter().map(String::as_str).collect();
    let mut trial: Vec<policy::Grant> = grants
        .iter()
        .filter(|g| !counted_ids.contains(g.id.as_str()))
        .cloned()
        .collect();
    if policy::decide(profile, &trial, req, now).verdict == policy::Verdict::Allow {
        return Some(None);
    }
    let uncounted = trial.len();
    let by_id: std::collections::HashMap<&str, &policy::Grant> =
        grants.iter().map(|g| (g.id.as_str(), g)).collect();
    let mut found = None;
    for id in counted {
        let Some(grant) = by_id.get(id.as_str()) else {
            continue;
        };
        trial.truncate(uncounted);
        trial.push((*grant).clone());
        if policy::decide(profile, &trial, req, now).verdict == policy::Verdict::Allow {
            found = Some(id);
            break;
        }
    }
    let id = found?;
    // One use is one command: a shell line running several commands that
    // only the counted grant allows (`make deploy-a; make deploy-b` on a
    // grant for one) would take several uses, so it is asked; so is one
    // that may run such a command more than once as written (a loop, a
    // function), and a handler action's command line likewise. (A plan
    // step's whole-line or whole-call grant covers no command alone: one
    // use.)
    if let Some((prefix, line)) = command_line(profile, req) {
        let (uncounted, counting) = (&trial[..uncounted], &trial[..]);
        let allows = |grants: &[policy::Grant], command: &str| {
            let detail = format!("{prefix}{command}");
            let scope = req.permission.as_ref().map(|p| {
                let mut scope = p.scope.clone();
                scope.insert(policy::SHELL_SCOPE_KEY.to_owned(), command.into());
                scope
            });
            let one = policy::Request {
                agent: req.agent,
                tool: req.tool,
                detail: &detail,
                permission: req
                    .permission
                    .as_ref()
                    .zip(scope.as_ref())
                    .map(|(p, scope)| policy::PermissionRef {
                        scope,
                        call: None,
                        ..*p
                    }),
            };
            policy::decide(profile, grants, &one, now).verdict == policy::Verdict::Allow
        };
        let analysis = policy::analyze_shell(line);
        let needing = analysis
            .commands
            .iter()
            .filter(|command| allows(counting, command) && !allows(uncounted, command))
            .count();
        if needing > 1 || (needing == 1 && analysis.repeats) {
            return None;
        }
    }
    Some(Some(id.clone()))
}

/// The shell line `req` runs, with what its detail holds before it: a
/// shell tool's whole detail, or a handler action's command line (its
/// scope's `command`, which ends its detail as in `execute_command
/// {content}`).
fn command_line<'r>(
    profile: &policy::Profile,
    req: &'r policy::Request<'_>,
) -> Option<(&'r str, &'r str)> {
    match &req.permission {
        None => profile.is_shell_tool(req.tool).then_some(("", req.detail)),
        Some(p) => {
            let line = p.scope.get(policy::SHELL_SCOPE_KEY)?.as_str()?;
            Some((req.detail.strip_suffix(line).unwrap_or(""), line))
        }
    }
}

/// Decides a decision-only action.
pub async fn decide_tool(
    gate: &Gate,
    agent: &str,
    tool: &str,
    detail: &str,
) -> Result<Decision, GateError> {
    decide(gate, agent, tool, detail, None).await
}

/// The policy's decision as stored on an action.
pub fn record(d: policy::Decision) -> Decision {
    Decision {
        result: match d.verdict {
            policy::Verdict::Allow => DecisionResult::Allow,
            policy::Verdict::Ask => DecisionResult::Ask,
            policy::Verdict::Deny => DecisionResult::Deny,
        },
        reason: d.reason,
        rule: d.rule.and_then(|r| serde_json::to_value(r).ok()),
    }
}

impl Gate {
    /// A dry run: what the policy decides for `tool`/`detail` for the
    /// calling agent now, and the action string it judged; nothing stored.
    pub async fn check(
        &self,
        caller: &crate::Caller,
        tool: &str,
        detail: &str,
    ) -> Result<(String, Decision), GateError> {
        self.check_in(caller, tool, detail, None, None).await
    }

    /// [`Gate::check`] for an action of `session` (sent by `runtime`):
    /// what the policy, the session's grants and its taint decide.
    pub async fn check_in(
        &self,
        caller: &crate::Caller,
        tool: &str,
        detail: &str,
        session: Option<&str>,
        runtime: Option<&str>,
    ) -> Result<(String, Decision), GateError> {
        crate::sessions::validate_origin(session, runtime)?;
        let agent = caller.agent_id()?;
        validate_tool(tool)?;
        crate::actions::check_len("detail", Some(detail), crate::actions::MAX_DETAIL)?;
        self.own_session(agent, session).await?;
        let decision = decide_in(self, agent, session, tool, detail, None)
            .await?
            .decision;
        // Past a rate limit the action would be asked: so says the dry run.
        let decision = self.rate_peeked(agent, decision).await?;
        metrics::counter!("actiongate_decisions_total", "result" => decision.result.as_str())
            .increment(1);
        Ok((policy::format_action(tool, detail), decision))
    }
}
