//! A decision as a team makes it (`docs/teams.md`): the approvals rules
//! of the action (its agent's profile's first rule whose pattern matches
//! the action string or one of its commands), the approver rule checked
//! for whoever decides, the quorum counted in the store, and an edit
//! checked before it is kept.

use actiongate_api::teams::Seen;
use actiongate_policy::approvals::{Approver, CompiledRule, approver_allowed};
use actiongate_store::{
    Action, ApiKey, ApprovalEntry, DecisionResult, Edit, PersonSeen, StoreError, TeamDecision,
};
use serde_json::{Map, Value};

use crate::actions::{MAX_DETAIL, check_len};
use crate::people::Decider;
use crate::policy::{NeededPermission, decide, decide_tool};
use crate::{Caller, Gate, GateError, GateResult};

/// The channels a decision may come through.
pub const CHANNELS: &[&str] = &[
    "api", "page", "cli", "telegram", "slack", "discord", "whatsapp", "mcp",
];

/// The channel of `caller` when nothing else says: a chat identity's chat,
/// else `api`.
pub fn channel_of(caller: &Caller) -> &'static str {
    let via = caller.via.as_deref().unwrap_or("");
    let chat = via.split(':').next().unwrap_or("");
    CHANNELS
        .iter()
        .find(|c| **c == chat && !matches!(**c, "api" | "page" | "cli" | "mcp"))
        .copied()
        .unwrap_or(if via == "local" { "cli" } else { "api" })
}

/// Whether `channel` is a chat, whose cards show an action as its agent
/// asked it.
pub fn is_chat(channel: &str) -> bool {
    CHANNELS.contains(&channel) && !matches!(channel, "api" | "page" | "cli" | "mcp")
}

/// What an approver changes before approving, and which version of the
/// action they read.
#[derive(Debug, Clone, Default)]
pub struct EditRequest {
    /// Handler actions: the params to run.
    pub params: Option<Value>,
    /// Decision-only actions: the detail to run.
    pub detail: Option<String>,
    /// The version read: an approval of another is refused (409).
    pub seen: Option<Seen>,
}

impl EditRequest {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.params.is_none() && self.detail.is_none()
    }
}

/// Who the rule lets decide, as text for an error.
fn refusal(rule: &CompiledRule, who: &str) -> GateError {
    GateError::forbidden(format!(
        "{who} is not an approver under {}: approvers are {}",
        rule.label(),
        rule.rule.approvers.join(", ")
    ))
}

/// Why an identity that is nobody's cannot approve toward a quorum: the
/// daemon could not tell whether two such identities (two keys, two chat
/// accounts) are two people or one, so a quorum counts people alone.
fn not_a_person(by: &str, required: u32) -> GateError {
    GateError::forbidden(format!(
        "{by} belongs to no person, and this action needs {required} approvals from distinct \
         people: only a person's approval counts toward it (an admin adds the identity to \
         a person: POST /v1/people)"
    ))
}

/// The approvals a set of rules asks for: the largest count, at least 1.
fn required(rules: &[CompiledRule]) -> u32 {
    rules.iter().map(|r| r.rule.count).max().unwrap_or(1)
}

impl Gate {
    /// The approvals rules that apply to an asked action: its agent's
    /// profile's first rule whose pattern matches `action_string`, and
    /// each of its commands' first (a shell line; a handler action's
    /// command line, in `scope`), and its handler action's `approvals`
    /// (`handler`: handler id and action name).
    pub async fn approval_rules(
        &self,
        agent: &str,
        action_string: &str,
        scope: Option<&Map<String, Value>>,
        handler: Option<(&str, &str)>,
    ) -> GateResult<Vec<CompiledRule>> {
        let profile = self.profile_of(agent).await?;
        let mut rules: Vec<CompiledRule> = profile
            .approval_rules_for(action_string, scope)
            .into_iter()
            .cloned()
            .collect();
        if let Some((id, name)) = handler {
            let h = self.handler(id).await?;
            if let Some(rule) = h.action(name).and_then(|a| a.approvals.clone()) {
                rules.push(rule);
            }
        }
        Ok(rules)
    }

    /// The approvals rules of a stored action: those it was asked under
    /// (kept with it, `crate::asked_rules`) and [`Gate::approval_rules`]
    /// now. Every one applies, so a profile changed while it waits may
    /// tighten what it needs but never loosen it. A kept copy that cannot
    /// be read fails (nobody decides it rather than too few).
    pub async fn rules_of(&self, action: &Action) -> GateResult<Vec<CompiledRule>> {
        let mut rules = crate::asked_rules::kept(&action.decision).map_err(|e| {
            tracing::error!(action = %action.id, error = %e, "kept approvals rules unreadable");
            GateError::internal()
        })?;
        let handler = action.handler.as_deref().zip(action.action.as_deref());
        rules.extend(
            self.approval_rules(
                &action.agent,
                &action.action_string,
                action.scope.as_ref(),
                handler,
            )
            .await?,
        );
        Ok(rules)
    }

    /// Fails with 403 naming the rule unless `d` is among the approvers of
    /// every one of `rules`.
    pub fn check_approver(rules: &[CompiledRule], d: &Decider) -> GateResult<()> {
        for rule in rules {
            let who = Approver {
                names: &d.names,
                groups: &d.groups,
            };
            if !approver_allowed(&rule.rule.approvers, who) {
                return Err(refusal(rule, &d.who));
            }
        }
        Ok(())
    }

    /// The identities whose approvals of `action` no longer count under
    /// `rules`: the approver has since left the rule's approvers, is no
    /// longer a person, or approved with a key since revoked. An approval
    /// counts while its approver still could give it, so a quorum is never
    /// met with one nobody could give now. `keys`: every key, revoked ones
    /// too (read when `None`). With them, the persons those that still
    /// count were checked as (see [`PersonSeen`]).
    pub(crate) async fn lapsed(
        &self,
        action: &Action,
        rules: &[CompiledRule],
        keys: Option<&[ApiKey]>,
    ) -> GateResult<(Vec<String>, Vec<PersonSeen>)> {
        if action.team.approvals.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let read;
        let keys = match keys {
            Some(keys) => keys,
            None => {
                read = self.store().list_keys().await?;
                &read
            }
        };
        let mut lapsed = Vec::new();
        let mut seen = Vec::new();
        for a in &action.team.approvals {
            let counts = match self.decider_now(&a.by, keys).await? {
                Some(d) => {
                    let ok = Gate::check_approver(rules, &d).is_ok();
                    if ok {
                        seen.push(d.seen);
                    }
                    ok
                }
                None => false,
            };
            if !counts {
                tracing::info!(action = %action.id, who = %a.who, by = %a.by,
                    "an earlier approval no longer counts: its approver could not give it now");
                lapsed.push(a.by.clone());
            }
        }
        Ok((lapsed, seen))
    }

    /// Whether `caller` may decide `action` under its approvals rules, and
    /// how many approvals it needs.
    pub async fn may_decide(&self, caller: &Caller, action: &Action) -> GateResult<u32> {
        Ok(self.checked_decider(caller, action).await?.0)
    }

    /// [`Gate::may_decide`], with the decider as checked.
    pub(crate) async fn checked_decider(
        &self,
        caller: &Caller,
        action: &Action,
    ) -> GateResult<(u32, Decider)> {
        let rules = self.rules_of(action).await?;
        let d = self.decider(caller).await?;
        Gate::check_approver(&rules, &d)?;
        Ok((required(&rules), d))
    }

    /// One decision of `caller` on pending `action` through `channel`:
    /// approve (`approve`) with an optional edit, or deny.
    pub(crate) async fn team_decide(
        &self,
        caller: &Caller,
        action: &Action,
        approve: bool,
        note: Option<String>,
        channel: &str,
        edit: EditRequest,
    ) -> GateResult<Action> {
        let rules = self.rules_of(action).await?;
        let d = self.decider(caller).await?;
        Gate::check_approver(&rules, &d)?;
        let mut required = required(&rules);
        // A chat card shows the action as asked, never an edit: what is
        // approved from one must still be that. An approval that does not
        // say what its approver read (a bare API call, a reply by words)
        // is of the action as asked too: it never approves an edit
        // unread. A denial stands whatever was read.
        let seen = match (approve, is_chat(channel)) {
            (false, _) => None,
            (true, true) => Some(Seen::Asked),
            (true, false) => Some(edit.seen.unwrap_or(Seen::Asked)),
        };
        // The approver rules and the count were just checked against the
        // action as read, unedited: an edit landing before this approval
        // is stored brings rules of its own (a count of people, other
        // approvers) that were not checked. An approval "as edited" of an
        // action read unedited is refused here, as the store would refuse
        // it were the action still unedited; one "as asked" the store
        // refuses if an edit landed meanwhile.
        if seen == Some(Seen::Edited) && !action.team.edited {
            return Err(GateError::conflict(
                "nobody edited this action: this approval was for an edited version it does \
                 not have; read it again",
            ));
        }
        let mut edited: Option<(String, Option<Map<String, Value>>)> = None;
        let edit = if approve && !edit.is_empty() {
            let (mut edit, edited_string, scope) = self.checked_edit(action, edit).await?;
            // The edited action answers to its own profile rule too, now
            // and (kept with it) at every later decision: a later approver
            // approves what will run, under its rule and count.
            let handler = action.handler.as_deref().zip(action.action.as_deref());
            let other = self
                .approval_rules(&action.agent, &edited_string, scope.as_ref(), handler)
                .await?;
            Gate::check_approver(&other, &d)?;
            required = required.max(self::required(&other));
            edit.decision_rule = crate::asked_rules::adding(&action.decision, &other);
            edited = Some((edited_string, scope));
            Some(edit)
        } else {
            None
        };
        if approve && required > 1 && !d.person {
            return Err(not_a_person(&d.by, required));
        }
        let (lapsed, mut people_seen) = if approve {
            self.lapsed(action, &rules, None).await?
        } else {
            (Vec::new(), Vec::new())
        };
        people_seen.push(d.seen.clone());
        let taints = approve
            && self
                .taints(
                    action,
                    edited
                        .as_ref()
                        .map(|(s, scope)| (s.as_str(), scope.as_ref())),
                )
                .await?;
        let decision = TeamDecision {
            taints,
            lapsed,
            seen,
            approve,
            entry: ApprovalEntry {
                who: d.who,
                by: d.by,
                channel: channel.to_owned(),
                at: actiongate_store::time::now(),
            },
            required,
            note,
            edit,
            people_seen,
        };
        match self.store().team_decide(&action.id, decision).await {
            Ok(done) => Ok(done.action),
            Err(StoreError::Conflict(m)) => Err(GateError::conflict(m)),
            Err(e) => Err(e.into()),
        }
    }

    /// Checks an edit of `action`: params against the handler action's
    /// schema, a detail against the profile; neither may be denied. The
    /// edit as stored, the edited action string and (a handler action's)
    /// its scope.
    async fn checked_edit(
        &self,
        action: &Action,
        edit: EditRequest,
    ) -> GateResult<(Edit, String, Option<Map<String, Value>>)> {
        match (&action.handler, edit.params, edit.detail) {
            (_, Some(_), Some(_)) => Err(GateError::invalid(
                "detail",
                "give params (handler actions) or detail (decision-only actions), not both",
            )),
            (None, Some(_), None) => Err(GateError::invalid(
                "params",
                "this is a decision-only action: edit its detail instead",
            )),
            (Some(_), None, Some(_)) => Err(GateError::invalid(
                "detail",
                "this is a handler action: edit its params instead",
            )),
            (Some(handler_id), Some(mut params), None) => {
                let handler = self.handler(handler_id).await?;
                let name = action.action.as_deref().unwrap_or_default();
                let Some(decl) = handler.action(name) else {
                    return Err(GateError::conflict(format!(
                        "handler '{handler_id}' no longer has action '{name}'"
                    )));
                };
                crate::bounds::check("params", &params, self.config().json.params)?;
                // Everyone sees a sensitive value as `***`: a change to it
                // would be approved by people who cannot see it.
                // The params as the agent sent them (the action holds the
                // masked view).
                let asked = match self.store().action_params(&action.id).await? {
                    Some(raw) => serde_json::from_str(&raw).map_err(|e| {
                        tracing::error!(action = %action.id, error = %e, "stored params are not JSON");
                        GateError::internal()
                    })?,
                    None => Value::Null,
                };
                decl.unmask_kept(&asked, &mut params);
                if let Some(ptr) = decl.sensitive_change(&asked, &params) {
                    return Err(GateError::invalid(
                        format!("params{ptr}"),
                        "a sensitive param cannot be edited: it is shown to nobody, so no \
                         approver after you could see the change; deny and let the agent ask \
                         again",
                    ));
                }
                let violations = decl.violations(&params);
                if !violations.is_empty() {
                    return Err(GateError::invalid_fields(
                        violations
                            .into_iter()
                            .map(|mut v| {
                                if !v.field.starts_with("params") {
                                    v.field = format!("params.{}", v.field);
                                }
                                v
                            })
                            .collect(),
                    ));
                }
                let detail = decl.detail(&params);
                check_len("params", Some(&detail), MAX_DETAIL)?;
                let scope = decl.scope(&params);
                let permission = decl.decl.permission.clone();
                let view = decl.masked(&params);
                let decision = decide(
                    self,
                    &action.agent,
                    handler_id,
                    &detail,
                    Some(NeededPermission {
                        handler: handler_id,
                        permission: &permission,
                        scope: &scope,
                        call: action.action.as_deref().map(|name| (name, &view)),
                        approvals: decl.approvals.as_ref(),
                        reaches_out: actiongate_api::ActionHints::reaches_out(
                            decl.decl.hints.as_ref(),
                        ),
                    }),
                )
                .await?;
                if decision.result == DecisionResult::Deny {
                    return Err(GateError::invalid(
                        "params",
                        format!("the profile denies the edited action: {}", decision.reason),
                    ));
                }
                let string = actiongate_policy::format_action(handler_id, &detail);
                Ok((
                    Edit {
                        params: Some(params),
                        params_view: Some(view),
                        detail: None,
                        action_string: Some(string.clone()),
                        decision_rule: None,
                    },
                    string,
                    Some(scope),
                ))
            }
            (None, None, Some(detail)) => {
                check_len("detail", Some(&detail), MAX_DETAIL)?;
                if detail.is_empty() {
                    return Err(GateError::invalid("detail", "must not be empty"));
                }
                let decision = decide_tool(self, &action.agent, &action.tool, &detail).await?;
                if decision.result == DecisionResult::Deny {
                    return Err(GateError::invalid(
                        "detail",
                        format!("the profile denies the edited action: {}", decision.reason),
                    ));
                }
                let string = actiongate_policy::format_action(&action.tool, &detail);
                Ok((
                    Edit {
                        params: None,
                        params_view: None,
                        detail: Some(detail),
                        action_string: None,
                        decision_rule: None,
                    },
                    string,
                    None,
                ))
            }
            (_, None, None) => Err(GateError::internal()),
        }
    }
}
