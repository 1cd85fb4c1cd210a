//! Requesting an action: policy, grants, idempotency, persistence and the
//! answer; reading and listing actions; waiting for one to settle.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use actiongate_api::{ActionHints, CreateAction, HandlerActionRequest};
use actiongate_policy as policy;
use actiongate_store::{
    Action, ActionFilter, ActionStatus, Claimed, DecisionResult, HandlerAction, NewAction,
};

use crate::caution::{cautioned, check_caution};
use crate::dispatch::Slot;
use crate::policy::{NeededPermission, validate_tool};
use crate::waiters::Registration;
use crate::{Caller, ErrorCode, Gate, GateError, GateResult};

/// The gauge of long-polls waiting for an action to settle.
const LONG_POLLS_OPEN: &str = "actiongate_long_polls_open";

/// A handler action's request, checked against its handler
/// ([`Gate::prepare_handler`]).
struct PreparedHandler {
    handler: std::sync::Arc<crate::handler_spec::CompiledHandler>,
    detail: String,
    scope: Map<String, Value>,
    permission: String,
    params_view: Value,
}

/// Most characters of a detail, an outcome's error text.
pub const MAX_DETAIL: usize = 64 * 1024;
/// Most characters of a reason or note.
pub const MAX_TEXT: usize = 4096;
/// Most characters of a free-text reply.
pub const MAX_REPLY: usize = 256;

/// Limits are in characters, as JSON Schema's `maxLength` counts them; a
/// text with U+0000 in it is refused whatever its length.
pub fn check_len(field: &str, value: Option<&str>, max: usize) -> GateResult<()> {
    match value {
        // Counting is only needed when the bytes could exceed the limit.
        Some(v) if v.len() > max && v.chars().count() > max => Err(GateError::invalid(
            field,
            format!("at most {max} characters"),
        )),
        // What a command line cannot hold and Postgres cannot store: an
        // action differing by one from what a shell runs (and the
        // analysers read) is refused the same on every backend.
        Some(v) if v.contains('\0') => Err(GateError::invalid(field, NUL_REFUSED)),
        _ => Ok(()),
    }
}

/// Why a text holding U+0000 is refused.
pub const NUL_REFUSED: &str = "may not hold the NUL character (U+0000)";

/// An agent id: 1-128 of `A-Z a-z 0-9 _ - . @`.
pub fn validate_agent_id(id: &str) -> GateResult<()> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'));
    if ok {
        Ok(())
    } else {
        Err(GateError::invalid(
            "agent",
            "1-128 characters from A-Z a-z 0-9 _ - . @",
        ))
    }
}

fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// SHA-256 (hex) of a request as sent, for an idempotency key to stand for.
pub(crate) fn request_hash<T: Serialize>(body: &T) -> String {
    hex::encode(Sha256::digest(serde_json::to_vec(body).unwrap_or_default()))
}

/// Checks a decision-only action's params: an object within the bounds
/// of a handler action's params. Only humans read them, so nothing else
/// is asked of them.
fn tool_params(params: &serde_json::Value, max_bytes: usize) -> GateResult<()> {
    if !params.is_object() {
        return Err(GateError::invalid("params", "must be a JSON object"));
    }
    crate::bounds::check("params", params, max_bytes)
}

/// What [`Gate::request_action`] answers.
pub struct Requested {
    /// The action as stored (or as it settled within the wait).
    pub action: Action,
    /// `false`: an earlier action with the same idempotency key.
    pub created: bool,
    /// The action as JSON text, rendered once when it was stored, when it
    /// is exactly what [`Requested::action`] serializes to (an adapter may
    /// send it as is).
    pub rendered: Option<String>,
}

/// Filters and paging of [`Gate::list_actions`].
#[derive(Debug, Default, Clone)]
pub struct ListActions {
    /// Only actions in this status.
    pub status: Option<ActionStatus>,
    /// Only this agent's (agents always see only their own).
    pub agent: Option<String>,
    /// Only this tool's.
    pub tool: Option<String>,
    /// Only this session's.
    pub session: Option<String>,
    /// Page size, 1-200 (default 50).
    pub limit: Option<i64>,
    /// The last id of the previous page.
    pub cursor: Option<String>,
    /// The longest waiting first instead of the newest first.
    pub oldest_first: bool,
}

impl Gate {
    /// A long-poll of `secs` seconds, checked against the configured most.
    pub fn wait_of(&self, secs: Option<u64>) -> GateResult<Duration> {
        let max = self.config().max_wait.as_secs();
        match secs {
            None => Ok(Duration::ZERO),
            Some(s) if s <= max => Ok(Duration::from_secs(s)),
            Some(_) => Err(GateError::invalid(
                "wait",
                format!("must be 0-{max} seconds"),
            )),
        }
    }

    /// The time a human has to decide: the default, or `timeout` within
    /// the configured bounds.
    pub fn timeout_of(&self, timeout: Option<&str>) -> GateResult<Duration> {
        let c = self.config();
        let Some(text) = timeout else {
            return Ok(c.default_timeout);
        };
        let d = policy::parse_duration(text)
            .map_err(|e| GateError::invalid("timeout", e.to_string()))?;
        if d < c.min_timeout || d > c.max_timeout {
            return Err(GateError::invalid(
                "timeout",
                format!(
                    "must be between {} and {}",
                    humanize(c.min_timeout),
                    humanize(c.max_timeout)
                ),
            ));
        }
        Ok(d)
    }

    /// An agent requests an action: it is decided, stored with its event
    /// (allowed handler actions already claimed for their first attempt,
    /// which starts at once), and, with a `wait`, answered once settled or
    /// when the wait runs out.
    pub async fn request_action(
        &self,
        caller: &Caller,
        body: CreateAction,
        wait: Duration,
    ) -> GateResult<Requested> {
        let arrived = tokio::time::Instant::now();
        let agent = caller.agent_id()?.to_owned();
        let guard = if wait.is_zero() {
            None
        } else {
            self.long_poll_guard(caller)?
        };
        let (reason, timeout, key) = body.common();
        let (session, runtime) = body.origin();
        crate::sessions::validate_origin(session, runtime)?;
        // A request refused for its own fields claims, opens or reopens no
        // session: those are checked first.
        check_len("reason", reason, MAX_TEXT)?;
        check_len("idempotency_key", key, 256)?;
        let timeout = self.timeout_of(timeout)?;
        let mut prepared = None;
        match &body {
            CreateAction::Tool(t) => {
                validate_tool(&t.tool)?;
                check_len("detail", Some(&t.detail), MAX_DETAIL)?;
                check_caution(t.caution.as_deref())?;
                if let Some(params) = &t.params {
                    tool_params(params, self.config().json.params)?;
                }
            }
            CreateAction::Handler(h) => prepared = Some(self.prepare_handler(h).await?),
        }
        let taken = self.admit_action_bytes(&agent, &body).await?;
        if let Some(s) = session {
            Box::pin(self.touch_session(&agent, s, runtime)).await?;
        }
        let (session, runtime) = (session.map(str::to_owned), runtime.map(str::to_owned));
        // Only a retry with the same key compares it.
        let request_hash = key.map(|_| request_hash(&body)).unwrap_or_default();
        // Every store call until the action is stored ends within one
        // bound of the request's arrival (Postgres), waits between them
        // included.
        let deadline = self.store().request_deadline(arrived);
        // Boxed: deciding holds many store calls' state, and a request that
        // then waits for a human should not carry it (tests/future_sizes.rs).
        let decided = Box::pin(actiongate_store::deadline::scope(deadline, async {
            let mut slot = None;
            let new = match body {
                CreateAction::Tool(t) => {
                    // Its fields were checked above.
                    let decided = crate::policy::decide_in(
                        self,
                        &agent,
                        t.session.as_deref(),
                        &t.tool,
                        &t.detail,
                        None,
                    )
                    .await?;
                    let decision = cautioned(decided.decision, t.caution.as_deref());
                    // Past a rate limit an allow asks, and then takes no use of a grant.
                    let decision = self.rate_limited(&agent, decision).await?;
                    let decision = crate::asked_rules::recorded(decision, &decided.rules);
                    let allowed = decision.result == DecisionResult::Allow;
                    NewAction {
                        take_use: decided.take_use.filter(|_| allowed),
                        relies_on: if allowed {
                            decided.relies_on
                        } else {
                            Vec::new()
                        },
                        reason: t.reason,
                        idempotency_key: t.idempotency_key,
                        request_hash,
                        params: t.params,
                        ..NewAction::new(agent, t.tool, t.detail, decision)
                    }
                }
                CreateAction::Handler(h) => {
                    let prepared = prepared.take().ok_or_else(GateError::internal)?;
                    let (new, s) = self
                        .handler_action(agent, h, prepared, request_hash)
                        .await?;
                    slot = s;
                    new
                }
            };
            let result = new.decision.result;
            // An item for a human: within the agent's limit, counted until
            // stored. An allow that takes a grant's use may yet be stored
            // asked (the use was taken meanwhile), so it counts too.
            let ticket = if result == DecisionResult::Ask || new.take_use.is_some() {
                match self.admit_pending(&new.agent).await {
                    Ok(ticket) => Some(ticket),
                    // A retry of a request already stored adds nothing: it is
                    // answered as any retry is (the stored action, or 409 when
                    // the key was used for another request).
                    Err(e) if e.code == ErrorCode::LimitReached => match &new.idempotency_key {
                        Some(key)
                            if self
                                .store()
                                .action_for_key(&new.agent, key)
                                .await?
                                .is_some() =>
                        {
                            None
                        }
                        _ => return Err(e),
                    },
                    Err(e) => return Err(e),
                }
            } else {
                None
            };
            let new = NewAction {
                deadline: chrono::Duration::from_std(timeout)
                    .ok()
                    .map(|d| actiongate_store::time::now() + d),
                session,
                runtime,
                ..new
            };
            Ok::<_, GateError>((new, slot, ticket, result))
        }))
        .await;
        let (new, slot, ticket, result) = decided?;
        // A waiter registered before the insert needs no read to start from,
        // and misses nothing however fast the action settles.
        let id = new.id.clone();
        let registered = (!wait.is_zero()).then(|| self.waiters().register(&id));
        let stored = Box::pin(actiongate_store::deadline::scope(deadline, async {
            self.taint_before(&new).await?;
            let (action, created, inserted) = match slot {
                None => {
                    let done = self.store().create_action(new).await?;
                    let rendered = done.rendered().map(str::to_owned);
                    (done.action, done.created, rendered)
                }
                Some(slot) => {
                    let (action, created) = self.insert_and_start(new, slot).await?;
                    (action, created, None)
                }
            };
            drop(ticket);
            Ok::<_, GateError>((action, created, inserted))
        }))
        .await;
        let (action, created, inserted) = stored?;
        if let Some(taken) = taken.filter(|_| !created) {
            taken.give_back(self); // A retry stored nothing.
        }
        // A retry of a call that ran already (its run was reported) is a
        // new call: the decision that let it run once does not let it run
        // again (a runtime whose call ids a script can choose would
        // otherwise turn one approval into any number of runs).
        if !created && self.store().run_claimed(&action.id).await? {
            return Err(GateError::conflict(format!(
                "action {} ran already (its run was reported): a new call needs its own \
                 decision, under a new idempotency key",
                action.id
            )));
        }
        if created {
            metrics::counter!("actiongate_decisions_total", "result" => result.as_str())
                .increment(1);
            if result == DecisionResult::Ask {
                self.deadlines_changed().notify_one();
            }
        }
        if wait.is_zero() || action.is_settled() {
            return Ok(Requested {
                action,
                created,
                rendered: inserted,
            });
        }
        let waited = async {
            match registered {
                Some(reg) if created => self.wait_settled_from(reg, wait).await,
                // An idempotent retry answers with an earlier action, not
                // `id`: the waiter on `id`, which will never settle, goes
                // first.
                unused => {
                    drop(unused);
                    self.wait_settled(&action.id, wait).await
                }
            }
        };
        let action = self.unless_revoked(guard, waited).await?;
        Ok(Requested {
            action,
            created,
            rendered: None,
        })
    }

    /// Whether letting `action` run taints its session: it has one, and
    /// under its agent's profile it reads untrusted content as asked, as
    /// an earlier approver edited it, or as `edited` (an action string an
    /// approver edits it into now, with a handler action's scope then),
    /// a handler action's command line judged as `bash`'s. The store
    /// records the taint in the transaction that lets it run.
    pub(crate) async fn taints(
        &self,
        action: &Action,
        edited: Option<(&str, Option<&Map<String, Value>>)>,
    ) -> GateResult<bool> {
        if action.session.is_none() {
            return Ok(false);
        }
        let profile = self.profile_of(&action.agent).await?;
        let earlier = match (&action.team.approved_detail, &action.team.approved_params) {
            (Some(d), _) => Some((actiongate_policy::format_action(&action.tool, d), None)),
            (None, Some(params)) => self.edited_call(action, params).await?,
            (None, None) => None,
        };
        Ok([
            Some((action.action_string.as_str(), action.scope.as_ref())),
            edited,
            earlier
                .as_ref()
                .map(|(s, scope)| (s.as_str(), scope.as_ref())),
        ]
        .into_iter()
        .flatten()
        .any(|(s, scope)| profile.taints_call(s, scope, action.reads_world())))
    }

    /// The action string and scope of handler action `action` with the
    /// `params` an earlier approver edited it into (`None` when its
    /// handler no longer has the action: nothing of it will run).
    async fn edited_call(
        &self,
        action: &Action,
        params: &Value,
    ) -> GateResult<Option<(String, Option<Map<String, Value>>)>> {
        let (Some(handler), Some(name)) = (&action.handler, &action.action) else {
            return Ok(None);
        };
        let h = self.handler(handler).await?;
        Ok(h.action(name).map(|a| {
            (
                actiongate_policy::format_action(handler, &a.detail(params)),
                Some(a.scope(params)),
            )
        }))
    }

    /// Records that allowed `new`, about to be stored, taints its session
    /// when it reads untrusted content: before it is stored, so that no
    /// crash leaves it run and its session untainted (one that stops it
    /// being stored leaves the session stricter, never looser).
    async fn taint_before(&self, new: &NewAction) -> GateResult<()> {
        let Some(session) = &new.session else {
            return Ok(());
        };
        if new.decision.result == DecisionResult::Allow
            && self.profile_of(&new.agent).await?.taints_call(
                &new.action_string,
                new.handler.as_ref().map(|h| &h.scope),
                new.handler
                    .as_ref()
                    .is_some_and(|h| ActionHints::reads_world(h.hints.as_ref())),
            )
        {
            self.store()
                .taint_session(session.clone(), new.id.clone(), new.action_string.clone())
                .await?;
        }
        Ok(())
    }

    /// Stores an allowed handler action already claimed for its first
    /// attempt and starts that attempt. One task does both, so a client
    /// that goes away meanwhile cannot leave the action claimed and unsent
    /// until its lease lapses.
    async fn insert_and_start(&self, new: NewAction, slot: Slot) -> GateResult<(Action, bool)> {
        let params = new
            .handler
            .as_ref()
            .map(|h| h.params.clone())
            .unwrap_or_default();
        let gate = self.clone();
        tokio::spawn(async move {
            let (action, created) = gate.store().insert_action(new).await?;
            if created && action.status == ActionStatus::Running {
                let claimed = Claimed {
                    action: action.clone(),
                    params,
                    attempt: 1,
                };
                gate.dispatcher().start(&gate, claimed, slot);
            }
            Ok::<_, actiongate_store::StoreError>((action, created))
        })
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "storing a handler action failed");
            GateError::internal()
        })?
        .map_err(GateError::from)
    }

    /// Checks a handler action's request against its handler: the handler
    /// and its action exist, the params fit their schema and bounds; what
    /// the rest of the request needs of it.
    async fn prepare_handler(&self, h: &HandlerActionRequest) -> GateResult<PreparedHandler> {
        let handler = match self.handler(&h.handler).await {
            Ok(handler) if handler.record.retired_at.is_none() => handler,
            Ok(_) => {
                return Err(GateError::conflict(format!(
                    "handler '{}' is retired",
                    h.handler
                )));
            }
            Err(e) if e.is_not_found() => {
                return Err(GateError::not_found(format!("no handler '{}'", h.handler)));
            }
            Err(e) => return Err(e),
        };
        let Some(action) = handler.action(&h.action) else {
            return Err(GateError::not_found(format!(
                "handler '{}' has no action '{}'",
                h.handler, h.action
            )));
        };
        crate::bounds::check("params", &h.params, self.config().json.params)?;
        let violations = action.violations(&h.params);
        if !violations.is_empty() {
            return Err(GateError::invalid_fields(violations));
        }
        let detail = action.detail(&h.params);
        check_len("params", Some(&detail), MAX_DETAIL)?;
        Ok(PreparedHandler {
            scope: action.scope(&h.params),
            permission: action.decl.permission.clone(),
            params_view: action.masked(&h.params),
            detail,
            handler,
        })
    }

    /// Decides a handler action [`Gate::prepare_handler`] checked. When the
    /// policy allows it and dispatch has room, it comes with a [`Slot`] and
    /// is to be stored claimed.
    async fn handler_action(
        &self,
        agent: String,
        h: HandlerActionRequest,
        prepared: PreparedHandler,
        request_hash: String,
    ) -> GateResult<(NewAction, Option<Slot>)> {
        let PreparedHandler {
            handler,
            detail,
            scope,
            permission,
            params_view,
        } = prepared;
        let Some(action) = handler.action(&h.action) else {
            return Err(GateError::internal());
        };
        let decided = crate::policy::decide_in(
            self,
            &agent,
            h.session.as_deref(),
            &h.handler,
            &detail,
            Some(NeededPermission {
                handler: &h.handler,
                permission: &permission,
                scope: &scope,
                call: Some((&h.action, &params_view)),
                approvals: action.approvals.as_ref(),
                reaches_out: ActionHints::reaches_out(action.decl.hints.as_ref()),
            }),
        )
        .await?;
        let decision = self.rate_limited(&agent, decided.decision).await?;
        let decision = crate::asked_rules::recorded(decision, &decided.rules);
        let allowed = decision.result == DecisionResult::Allow;
        let take_use = decided.take_use.filter(|_| allowed);
        let relies_on = if allowed {
            decided.relies_on
        } else {
            Vec::new()
        };
        let display = action.display(&params_view);
        let slot = if decision.result == DecisionResult::Allow {
            self.dispatcher().reserve(&h.handler)
        } else {
            None
        };
        let claim_until = slot.as_ref().map(|_| {
            actiongate_store::time::now() + self.dispatcher().lease(handler.record.timeout_ms)
        });
        let new = NewAction {
            take_use,
            relies_on,
            reason: h.reason,
            idempotency_key: h.idempotency_key,
            request_hash,
            handler: Some(HandlerAction {
                handler: h.handler.clone(),
                action: h.action,
                params: h.params,
                params_view,
                permission,
                scope,
                display,
                hints: action.decl.hints.clone(),
                claim_until,
            }),
            ..NewAction::new(agent, h.handler, detail, decision)
        };
        Ok((new, slot))
    }

    /// Waits up to `wait` for action `id` to settle; the action then.
    pub async fn wait_settled(&self, id: &str, wait: Duration) -> GateResult<Action> {
        let _open = crate::OpenGauge::new(LONG_POLLS_OPEN);
        Ok(self.waiters().wait_for_action(id, wait).await?)
    }

    /// [`Gate::wait_settled`] for a waiter registered before its action was
    /// stored (and seen unsettled).
    async fn wait_settled_from(&self, reg: Registration<'_>, wait: Duration) -> GateResult<Action> {
        let _open = crate::OpenGauge::new(LONG_POLLS_OPEN);
        Ok(self.waiters().wait_for_action_from(reg, wait).await?)
    }

    /// An action the caller may see (another agent's is "not found").
    pub async fn visible_action(&self, caller: &Caller, id: &str) -> GateResult<Action> {
        match self.store().get_action(id).await {
            Ok(a) if caller.may_see(&a.agent) => Ok(a),
            Ok(_) | Err(actiongate_store::StoreError::NotFound) => {
                Err(GateError::not_found(format!("no action '{id}'")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// An action the caller may see; with a `wait`, once it settles or the
    /// wait runs out.
    pub async fn get_action(
        &self,
        caller: &Caller,
        id: &str,
        wait: Duration,
    ) -> GateResult<Action> {
        let guard = if wait.is_zero() {
            None
        } else {
            self.long_poll_guard(caller)?
        };
        let action = self.visible_action(caller, id).await?;
        if wait.is_zero() || action.is_settled() {
            return Ok(action);
        }
        // Nothing is kept while waiting: an idle long-poll's memory is its future.
        drop(action);
        self.unless_revoked(guard, self.wait_settled(id, wait))
            .await
    }

    /// A page of the actions the caller may see, newest first, and the
    /// cursor of the next page.
    pub async fn list_actions(
        &self,
        caller: &Caller,
        q: ListActions,
    ) -> GateResult<(Vec<Action>, Option<String>)> {
        let limit = q.limit.unwrap_or(50);
        if !(1..=200).contains(&limit) {
            return Err(GateError::invalid("limit", "must be 1-200"));
        }
        if let Some(agent) = &q.agent {
            validate_agent_id(agent)?;
        }
        if let Some(tool) = &q.tool {
            validate_tool(tool)?;
        }
        if let Some(session) = &q.session {
            crate::sessions::validate_session("session", session)?;
        }
        // An action id as it is written (the hyphenated form alone, as
        // the schema's pattern says).
        if q.cursor
            .as_deref()
            .is_some_and(|c| c.len() != 36 || uuid::Uuid::try_parse(c).is_err())
        {
            return Err(GateError::invalid(
                "cursor",
                "the next_cursor of the previous page",
            ));
        }
        let agent = if caller.sees_all() {
            q.agent
        } else {
            let own = caller.agent_id()?.to_owned();
            if q.agent.as_deref().is_some_and(|a| a != own) {
                // Another agent's actions are invisible: an empty page.
                return Ok((Vec::new(), None));
            }
            Some(own)
        };
        let filter = ActionFilter {
            status: q.status,
            agent,
            tool: q.tool,
            session: q.session,
            cursor: q.cursor,
            limit: limit + 1,
            oldest_first: q.oldest_first,
        };
        let mut items = self.store().list_actions(&filter).await?;
        let more = items.len() as i64 > limit;
        items.truncate(limit as usize);
        let cut = crate::paging::cut_to_bytes(&mut items);
        let next_cursor = (more || cut).then(|| items.last().map(|a| a.id.clone()));
        Ok((items, next_cursor.flatten()))
    }
}
