//! Deciding on a pending action: approve (once, or "approve and remember",
//! which also grants), deny, reply by words; and what follows a decision:
//! cancel, the agent's outcome, an executor's signed result.

use actiongate_api::{OutcomeBody, OutcomeStatus, Remember};
use actiongate_policy as policy;
use actiongate_store::{
    Action, ActionStatus, ApproveFirst, NewGrant, NewGrantTarget, Outcome, Transition,
};

use crate::actions::{MAX_DETAIL, MAX_REPLY, MAX_TEXT, check_len, validate_agent_id};
use crate::decided_again::{action_holds, sent_again};
use crate::quorum::EditRequest;
use crate::{Caller, Gate, GateError, GateResult};

const PENDING: &[ActionStatus] = &[ActionStatus::Pending];

/// Longest `webhook-id` an executor's callback may carry (the reference
/// executor's are about 50 bytes).
pub const MAX_WEBHOOK_ID: usize = 256;

/// A verified executor callback's id: as sent, and as it is used up (its
/// handler's own, so one executor cannot use up another's).
#[derive(Debug, Clone)]
pub struct CallbackId {
    webhook_id: String,
    seen: String,
}

/// A human's decision on a pending action.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Approve it, once.
    Approve {
        /// A note kept with the decision.
        note: Option<String>,
    },
    /// Approve it and grant what `remember` says, in one transaction.
    ApproveAndRemember {
        /// A note kept with the decision and the grant.
        note: Option<String>,
        /// The grant.
        remember: Remember,
    },
    /// Deny it.
    Deny {
        /// Why (the agent sees it).
        reason: Option<String>,
    },
}

impl Verdict {
    /// The verdict a free-text reply means (seed 003: yes, approve, ok,
    /// continue / no, reject, stop, cancel); `None` when not understood.
    /// A denial word may be followed by why (`no, not on a Friday`), as a
    /// chat reply may; an approval is the word alone.
    pub fn from_reply(text: &str) -> Option<Verdict> {
        let note = Some(format!("reply: {}", text.trim()));
        match policy::parse_reply(text) {
            Some(policy::Reply::Approve) => Some(Verdict::Approve { note }),
            Some(policy::Reply::Deny) => Some(Verdict::Deny { reason: note }),
            None => {
                let t = text.trim();
                let first = t
                    .split(|c: char| c.is_whitespace() || c == ',' || c == ':')
                    .next()?;
                (first.len() < t.len() && policy::parse_reply(first) == Some(policy::Reply::Deny))
                    .then_some(Verdict::Deny { reason: note })
            }
        }
    }
}

/// What a reply that is not understood is answered with.
pub const REPLY_HELP: &str = "not understood; say yes, approve, ok or continue to approve, or no, reject, stop or cancel to deny (a denial may be followed by why: no, not on a Friday)";

/// What an executor posts for an attempt it accepted with 202.
#[derive(Debug, Clone)]
pub struct ExecutorResult {
    /// `completed` or `failed`.
    pub status: ActionStatus,
    /// The result payload.
    pub result: Option<serde_json::Value>,
    /// Error text when it failed.
    pub error: Option<String>,
    /// The attempt this answers.
    pub attempt: i64,
    /// The action the executor means, when its signed body names it.
    pub action_id: Option<String>,
}

impl Gate {
    /// An operator (`caller`) decides pending action `id`. Two deciders
    /// racing produce one decision; the loser gets
    /// [`crate::ErrorCode::ActionSettled`]. The channel is the caller's
    /// chat, or `api`.
    pub async fn decide(&self, caller: &Caller, id: &str, verdict: Verdict) -> GateResult<Action> {
        let channel = crate::quorum::channel_of(caller);
        self.decide_via(caller, id, verdict, channel, EditRequest::default())
            .await
    }

    /// [`Gate::decide`] through `channel` (one of
    /// [`crate::quorum::CHANNELS`]), approving with `edit` when it changes
    /// something. Under an approvals rule an approval may leave the action
    /// pending, its `approvals` grown, until enough distinct people agree.
    pub async fn decide_via(
        &self,
        caller: &Caller,
        id: &str,
        verdict: Verdict,
        channel: &str,
        edit: EditRequest,
    ) -> GateResult<Action> {
        caller.require(actiongate_store::Role::Operator)?;
        if !crate::quorum::CHANNELS.contains(&channel) {
            return Err(GateError::invalid(
                "channel",
                format!("one of {}", crate::quorum::CHANNELS.join(", ")),
            ));
        }
        // A chat is the channel of its own identities only: a key naming
        // one would put in the record (and a receipt) a chat it never
        // came through.
        let chat = crate::quorum::is_chat(channel);
        if chat && crate::quorum::channel_of(caller) != channel {
            return Err(GateError::invalid(
                "channel",
                "a chat's channel is for decisions made in that chat; a key decides through \
                 api, page, cli or mcp",
            ));
        }
        self.apply(caller, id, verdict, None, channel, edit).await
    }

    /// Carries out `verdict`; a length error names `field` when given (a
    /// reply's note is its `text`), else the verdict's own field.
    async fn apply(
        &self,
        caller: &Caller,
        id: &str,
        verdict: Verdict,
        field: Option<&str>,
        channel: &str,
        edit: EditRequest,
    ) -> GateResult<Action> {
        match verdict {
            Verdict::Approve { note } => {
                check_len(field.unwrap_or("note"), note.as_deref(), MAX_TEXT)?;
                let action = self.visible_action(caller, id).await?;
                caller.not_for_own(Some(&action.agent))?;
                let plain = edit.is_empty();
                let result = self
                    .team_decide(caller, &action, true, note, channel, edit)
                    .await;
                if !plain {
                    return result;
                }
                let by = caller.identity();
                sent_again(result, self.visible_action(caller, id), |a| {
                    action_holds(a, &by, true)
                })
                .await
            }
            Verdict::Deny { reason } => {
                check_len(field.unwrap_or("reason"), reason.as_deref(), MAX_TEXT)?;
                let action = self.visible_action(caller, id).await?;
                let result = self
                    .team_decide(caller, &action, false, reason, channel, edit)
                    .await;
                let by = caller.identity();
                sent_again(result, self.visible_action(caller, id), |a| {
                    action_holds(a, &by, false)
                })
                .await
            }
            Verdict::ApproveAndRemember { note, remember } => {
                if !edit.is_empty() {
                    // No such action is 404 whatever the body says.
                    self.visible_action(caller, id).await?;
                    return Err(GateError::invalid(
                        "remember",
                        "an edited action is approved once; approve it without remember",
                    ));
                }
                self.approve_and_remember(caller, id, note, remember, channel)
                    .await
            }
        }
    }

    /// A reply by words: [`Verdict::from_reply`], or 422 naming `text`.
    pub async fn reply(&self, caller: &Caller, id: &str, text: &str) -> GateResult<Action> {
        caller.require(actiongate_store::Role::Operator)?;
        check_len("text", Some(text), MAX_REPLY)?;
        let verdict =
            Verdict::from_reply(text).ok_or_else(|| GateError::invalid("text", REPLY_HELP))?;
        let channel = crate::quorum::channel_of(caller);
        self.apply(
            caller,
            id,
            verdict,
            Some("text"),
            channel,
            EditRequest::default(),
        )
        .await
    }

    /// Approves `id` and grants what `remember` says, in one transaction:
    /// the gear's "don't ask again".
    async fn approve_and_remember(
        &self,
        caller: &Caller,
        id: &str,
        note: Option<String>,
        remember: Remember,
        channel: &str,
    ) -> GateResult<Action> {
        check_len("note", note.as_deref(), MAX_TEXT)?;
        let action = self.visible_action(caller, id).await?;
        let (required, decider) = self.checked_decider(caller, &action).await?;
        if required > 1 {
            return Err(GateError::conflict(format!(
                "this action needs {required} approvals from distinct people: approve it \
                 without remember"
            )));
        }
        let target = self.remember_target(&action, &remember).await?;
        let agent = match remember.agent.as_deref() {
            None => Some(action.agent.clone()),
            Some("*") => None,
            Some(a) => {
                validate_agent_id(a).map_err(|_| {
                    GateError::invalid("remember.agent", "an agent id, or * for any agent")
                })?;
                Some(a.to_owned())
            }
        };
        caller.not_for_own(Some(&action.agent))?;
        caller.not_for_own(agent.as_deref())?;
        let expires_at = self.parse_expires(&remember.expires, "remember.expires")?;
        let (session, uses) =
            crate::sessions::grant_scope("remember.", remember.session.clone(), remember.uses)?;
        let agent = match &session {
            Some(s) => Some(self.session_grant_agent("remember.agent", s, agent).await?),
            None => agent,
        };
        let new = NewGrant {
            session,
            uses,
            id: crate::grants::new_grant_id(),
            agent,
            target,
            granted_by: caller.identity(),
            expires_at,
            note: note.clone(),
        };
        // Recorded as an approval, as any one person's is.
        let first = ApproveFirst {
            seen: decider.seen,
            taints: self.taints(&action, None).await?,
            action_id: id.to_owned(),
            decided_by: decider.by,
            note,
            person: decider.who,
            channel: channel.to_owned(),
        };
        let created = self.store().create_grant(new, Some(first)).await?;
        created.approved_first.ok_or_else(GateError::internal)
    }

    /// What "approve and remember" with `remember` grants for `action`.
    async fn remember_target(
        &self,
        action: &Action,
        remember: &Remember,
    ) -> GateResult<NewGrantTarget> {
        match (&action.handler, &action.permission) {
            (Some(handler), Some(permission)) => {
                if remember.pattern.is_some() {
                    return Err(GateError::invalid(
                        "remember.pattern",
                        "handler actions are granted by scope, not pattern",
                    ));
                }
                // The operator's scope as written (a glob widens it); by
                // default this action's own values, each matching only
                // itself: a `*` in them is the agent's, not the operator's.
                let scope = remember
                    .scope
                    .clone()
                    .or_else(|| action.scope.as_ref().map(policy::literal_scope))
                    .unwrap_or_default();
                self.permission_target(handler, permission, scope, "remember.scope")
                    .await
            }
            _ => {
                if remember.scope.is_some() {
                    return Err(GateError::invalid(
                        "remember.scope",
                        "decision-only actions are granted by pattern, not scope",
                    ));
                }
                if let Some(p) = &remember.pattern {
                    return crate::grants::tool_target(&action.tool, p, "remember.pattern");
                }
                // A grant matches the detail alone: made by default from a
                // file write approved for its content, it would allow any
                // content to that path ("the same request" it is not).
                if action
                    .params
                    .as_ref()
                    .and_then(serde_json::Value::as_object)
                    .is_some_and(|m| !m.is_empty())
                {
                    return Err(GateError::invalid(
                        "remember",
                        "this action carries an input (its params: a file's content, an \
                         edit) that no grant holds: a grant of its detail would allow any \
                         input to it; give remember.pattern to grant that knowingly",
                    ));
                }
                // A line that changes directory is granted whole: its
                // other commands mean what they do only after that `cd`.
                let profile = self.profile_of(&action.agent).await?;
                if policy::needs_whole_line(&profile, &action.tool, &action.detail) {
                    let pattern = policy::line_pattern(&profile, &action.tool, &action.detail)
                        .map_err(|no| GateError::invalid("remember", no.reason))?;
                    return crate::grants::line_target(&action.tool, &pattern, "remember");
                }
                let pattern = remembered_pattern(&profile, action)?;
                if pattern.chars().count() > policy::MAX_PATTERN_LEN {
                    return Err(GateError::invalid(
                        "remember",
                        format!(
                            "this action's line is too long for a grant's pattern (at most {} \
                             characters written as one): give remember.pattern",
                            policy::MAX_PATTERN_LEN
                        ),
                    ));
                }
                crate::grants::tool_target(&action.tool, &pattern, "remember")
            }
        }
    }

    /// Whether "approve and remember" with the grant dialog's defaults
    /// (this action's scope, or exactly its analysed command, for its
    /// agent) can grant for pending `action`: a chat offers "Approve for
    /// 1h" only then. A command line no grant can cover cannot.
    pub async fn can_remember(&self, action: &Action) -> bool {
        let defaults = Remember {
            expires: "1h".to_owned(),
            scope: None,
            pattern: None,
            agent: None,
            session: None,
            uses: None,
        };
        self.remember_target(action, &defaults).await.is_ok()
    }

    /// Cancels a pending action (its agent, or an operator). For anyone
    /// but its agent, cancelling ends it as a denial would: under an
    /// approvals rule only its approvers may.
    pub async fn cancel(&self, caller: &Caller, id: &str) -> GateResult<Action> {
        let action = self.visible_action(caller, id).await?;
        if caller.agent.as_deref() != Some(action.agent.as_str())
            && action.status == ActionStatus::Pending
        {
            self.may_decide(caller, &action).await?;
        }
        let by = caller.identity();
        let result = self
            .store()
            .transition(
                id,
                Transition {
                    from: PENDING,
                    to: ActionStatus::Cancelled,
                    decided_by: Some(by.clone()),
                    note: None,
                    outcome: None,
                    event: "action.cancelled",
                },
            )
            .await
            .map_err(GateError::from);
        // Cancelled by this caller already: the cancel sent again.
        sent_again(result, self.visible_action(caller, id), |a| {
            a.status == ActionStatus::Cancelled && a.decided_by.as_deref() == Some(by.as_str())
        })
        .await
    }

    /// The agent reports how an approved decision-only action went.
    pub async fn outcome(
        &self,
        caller: &Caller,
        id: &str,
        body: OutcomeBody,
    ) -> GateResult<Action> {
        let action = self.visible_action(caller, id).await?;
        if action.handler.is_some() {
            return Err(GateError::conflict(
                "handler actions get their outcome from their executor",
            ));
        }
        if caller.agent.as_deref() != Some(action.agent.as_str()) {
            return Err(GateError::forbidden(
                "only the agent that requested the action reports its outcome",
            ));
        }
        let (to, event) = match body.status {
            OutcomeStatus::Completed => (ActionStatus::Completed, "action.completed"),
            OutcomeStatus::Failed => (ActionStatus::Failed, "action.failed"),
        };
        check_len("error", body.error.as_deref(), MAX_DETAIL)?;
        if let Some(r) = &body.result {
            crate::bounds::check("result", r, self.config().json.result)?;
        }
        self.admit_request_bytes(&action.agent, crate::bounds::json_len(&body, usize::MAX))
            .await?;
        let outcome = Outcome {
            status: to,
            result: body.result,
            error: body.error,
        };
        let result = self
            .store()
            .transition(
                id,
                Transition {
                    from: &[ActionStatus::Approved],
                    to,
                    decided_by: None,
                    note: None,
                    outcome: Some(outcome.clone()),
                    event,
                },
            )
            .await
            .map_err(GateError::from);
        // This outcome reported already: the report sent again.
        sent_again(result, self.visible_action(caller, id), |a| {
            a.outcome.as_ref() == Some(&outcome)
        })
        .await
    }

    /// Checks an executor's signed callback for action `id`: the
    /// signature of one of its handler's secrets over the body. Unknown
    /// actions answer like bad signatures, so an unauthenticated caller
    /// learns nothing about which ids exist. The callback's id as it is
    /// used up: the handler's own (an executor cannot use up another
    /// handler's ids), at most [`MAX_WEBHOOK_ID`] bytes.
    pub async fn verify_executor(
        &self,
        id: &str,
        webhook_id: &str,
        timestamp: &str,
        signature: &str,
        body: &[u8],
    ) -> GateResult<CallbackId> {
        let unauthorized =
            || GateError::unauthorized("missing, invalid, stale or replayed webhook signature");
        if webhook_id.is_empty() || webhook_id.len() > MAX_WEBHOOK_ID {
            return Err(unauthorized());
        }
        let action = match self.store().get_action(id).await {
            Ok(a) => a,
            Err(actiongate_store::StoreError::NotFound) => return Err(unauthorized()),
            Err(e) => return Err(e.into()),
        };
        let Some(handler) = action.handler.as_deref() else {
            return Err(unauthorized());
        };
        let secrets = self
            .handler_secrets(handler)
            .await
            .map_err(|_| unauthorized())?;
        if crate::sign::verify(&secrets, webhook_id, timestamp, signature, body) {
            Ok(CallbackId {
                webhook_id: webhook_id.to_owned(),
                seen: format!("{handler}\u{1f}{webhook_id}"),
            })
        } else {
            Err(unauthorized())
        }
    }

    /// Records a signed callback's id as seen when the callback is refused
    /// before [`Gate::executor_result`] records anything (a body that does
    /// not parse): it cannot be replayed either. Fails only when the store
    /// does (the executor may then retry).
    pub async fn refuse_callback(&self, callback: CallbackId) -> GateResult<()> {
        self.store().consume_webhook(callback.seen).await?;
        Ok(())
    }

    /// Records an executor's result for action `id`, verified by
    /// [`Gate::verify_executor`]. The signed callback must be bound to `id`:
    /// its body's `action_id` is `id`, or (without one) its `webhook_id`
    /// contains `id`; so a result signed for one action is refused at
    /// another. Each `webhook_id` is used once, whether the result is
    /// accepted or refused.
    pub async fn executor_result(
        &self,
        id: &str,
        callback: CallbackId,
        result: ExecutorResult,
    ) -> GateResult<Action> {
        let CallbackId {
            webhook_id,
            seen: seen_id,
        } = callback;
        // An error text is kept as told; a NUL in it (a file's bytes, say)
        // as `␀`, which every backend stores.
        let mut result = result;
        result.error = result.error.map(|e| e.replace('\0', "\u{2400}"));
        let replayed =
            || GateError::unauthorized("missing, invalid, stale or replayed webhook signature");
        let bound = match &result.action_id {
            Some(named) => named == id,
            None => webhook_id.contains(id),
        };
        let refusal = if !bound {
            Some(GateError::unauthorized(
                "the signed callback is not bound to this action: its body's action_id, or \
                 without one its webhook-id, must name the action in the URL",
            ))
        } else if !matches!(
            result.status,
            ActionStatus::Completed | ActionStatus::Failed
        ) {
            Some(GateError::invalid("status", "must be completed or failed"))
        } else {
            check_len("error", result.error.as_deref(), MAX_DETAIL).err()
        };
        if let Some(e) = refusal {
            return match self.store().consume_webhook(seen_id).await? {
                true => Err(e),
                false => Err(replayed()),
            };
        }
        // An echoed sensitive value stays out of the record.
        let sensitive = self.sensitive_values_of(id).await?;
        let max = self.config().json.result;
        let outcome = Outcome {
            status: result.status,
            result: result
                .result
                .map(|r| crate::scrub::value(crate::dispatch::kept_result(r, max), &sensitive)),
            error: result.error.map(|e| crate::scrub::text(&e, &sensitive)),
        };
        match self
            .store()
            .accept_result(id, seen_id, result.attempt, outcome)
            .await
        {
            Ok(a) => Ok(a),
            Err(actiongate_store::StoreError::Conflict(_)) => Err(replayed()),
            Err(e) => Err(e.into()),
        }
    }
}

/// The pattern "remember" grants for a decision-only action: built from
/// the analysed command line, one exact alternative per simple command
/// (`cargo fmt && cargo build` grants `cargo fmt` and `cargo build`), so the
/// grant matches what it was made for. A line no grant can cover (a
/// substitution, a redirection, a command that runs commands) is
/// refused with the reason instead of a grant that never matches.
fn remembered_pattern(profile: &policy::Profile, action: &Action) -> GateResult<String> {
    match policy::grant_patterns(profile, &action.tool, &action.detail) {
        Ok(patterns) if patterns.len() == 1 => Ok(patterns.concat()),
        Ok(patterns) => Ok(format!("(?:{})", patterns.join("|"))),
        Err(no) => Err(GateError::invalid("remember", no.reason)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_one_word_and_a_denial_may_say_why() {
        let approve = |t| matches!(Verdict::from_reply(t), Some(Verdict::Approve { .. }));
        let deny = |t| matches!(Verdict::from_reply(t), Some(Verdict::Deny { .. }));
        assert!(approve("yes") && approve(" OK! "));
        for t in [
            "no",
            "no, not on a Friday",
            "stop: wrong branch",
            "Reject it",
        ] {
            assert!(deny(t), "{t}");
        }
        match Verdict::from_reply("no: not now") {
            Some(Verdict::Deny { reason }) => {
                assert_eq!(reason.as_deref(), Some("reply: no: not now"));
            }
            other => panic!("{other:?}"),
        }
        // An approval is the word alone: what follows may take it back.
        for t in [
            "ok, let me check first",
            "yes no",
            "approve? this deletes",
            "maybe",
        ] {
            assert!(Verdict::from_reply(t).is_none(), "{t}");
        }
    }
}
