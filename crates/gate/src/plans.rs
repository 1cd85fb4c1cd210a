//! Plans (issue 33): an agent asks approval for a task's steps at once; an
//! operator approves the plan as a whole or step by step, or denies it.
//! Each approved step becomes grants of one use scoped to the plan's
//! session (a handler step's bound to its call: action and params as
//! shown), so exactly those steps run without another question, in any
//! order, and nothing else does. Also runs reported after the fact.

use actiongate_api::sessions::{CreatePlan, Plan, PlanStep, ReportRun, RunMatched};
use actiongate_store::{NewGrant, NewGrantTarget, Role};
use chrono::Utc;
use serde_json::{Map, Value};

use crate::actions::{MAX_DETAIL, MAX_TEXT, check_len};
use crate::paging::ListPage;
use crate::policy::{governing_rules, tainted_reason, validate_tool};
use crate::sessions::{UNDECIDED_RUN, validate_origin};
use crate::{Caller, Gate, GateError, GateResult};
use actiongate_policy::approvals::CompiledRule;

/// A plan step as the profile judges it: its action string, the approvals
/// rules governing it, whether it (reaches out, may answer with a
/// stranger's words), and its scope.
type StepAction = (
    String,
    Vec<CompiledRule>,
    (bool, bool),
    Option<Map<String, Value>>,
);

/// Sessions on a page when the caller does not say.
pub const SESSIONS_PAGE: i64 = 200;
/// Plans on a page when the caller does not say.
pub const PLANS_PAGE: i64 = 200;
/// Most steps of a plan.
pub const MAX_STEPS: usize = 200;
/// How far back a reported run looks for the decision that covered it.
const RUN_LOOKBACK: chrono::Duration = chrono::Duration::hours(24);

impl Gate {
    /// An agent asks approval for a plan; whether it was made now (`false`:
    /// asked before under the same idempotency key, that plan unchanged).
    pub async fn create_plan(&self, caller: &Caller, body: CreatePlan) -> GateResult<(Plan, bool)> {
        let agent = caller.agent_id()?.to_owned();
        // A retry of a plan stored is answered before any limit is counted.
        let key = crate::request_key::request_key(body.idempotency_key.as_deref(), &body)?;
        if let Some(key) = &key
            && let Some(plan) = self.store().plan_for_key(&agent, key).await?
        {
            return Ok((plan, false));
        }
        validate_origin(Some(&body.session), body.runtime.as_deref())?;
        check_len("reason", body.reason.as_deref(), MAX_TEXT)?;
        if body.steps.is_empty() || body.steps.len() > MAX_STEPS {
            return Err(GateError::invalid("steps", format!("1-{MAX_STEPS} steps")));
        }
        let mut steps = Vec::with_capacity(body.steps.len());
        for (i, s) in body.steps.into_iter().enumerate() {
            steps.push(self.plan_step(i, s.into()).await?);
        }
        // Another agent's session is refused before anything of it is read.
        self.own_session(&agent, Some(&body.session)).await?;
        let profile = self.profile_of(&agent).await?;
        self.steps_that_ask(&profile, &body.session, &mut steps)
            .await?;
        // A plan waits for a human: it counts toward the agent's pending
        // limit, admitted until it is stored.
        let _ticket = self.admit_pending(&agent).await?;
        self.admit_request_bytes(&agent, crate::bounds::json_len(&steps, usize::MAX))
            .await?;
        self.touch_session(&agent, &body.session, body.runtime.as_deref())
            .await?;
        let plan = Plan {
            id: format!(
                "{}{}",
                actiongate_store::PLAN_PREFIX,
                uuid::Uuid::now_v7().simple()
            ),
            agent,
            session: body.session,
            reason: body.reason,
            status: "pending".to_owned(),
            steps,
            created_at: actiongate_store::time::from_ms(actiongate_store::time::to_ms(Utc::now())),
            decided_at: None,
            decided_by: None,
        };
        Ok(self.store().create_plan(plan, key).await?)
    }

    /// A step as sent, checked: `{tool, detail}` or `{handler, action, params}`.
    async fn plan_step(&self, i: usize, s: PlanStep) -> GateResult<PlanStep> {
        let field = |f: &str| format!("steps[{i}].{f}");
        match (&s.tool, &s.detail, &s.handler, &s.action) {
            (Some(tool), Some(detail), None, None) if s.params.is_none() => {
                validate_tool(tool).map_err(|_| {
                    GateError::invalid(field("tool"), "1-128 characters from A-Z a-z 0-9 _ - .")
                })?;
                check_len(&field("detail"), Some(detail), MAX_DETAIL)?;
                // Approving the step grants exactly its line, as a pattern:
                // one too long for a grant could never be approved.
                if regex::escape(detail).chars().count() > actiongate_policy::MAX_PATTERN_LEN {
                    return Err(GateError::invalid(
                        field("detail"),
                        format!(
                            "too long for a plan: approving a step grants its line as a \
                             pattern, at most {} characters with a `\\` before each \
                             special character; request it as an action instead",
                            actiongate_policy::MAX_PATTERN_LEN
                        ),
                    ));
                }
            }
            (None, None, Some(handler), Some(action)) => {
                let h = match self.handler(handler).await {
                    Ok(h) if h.record.retired_at.is_none() => h,
                    Ok(_) => {
                        return Err(GateError::conflict(format!(
                            "{}: handler '{handler}' is retired",
                            field("handler")
                        )));
                    }
                    Err(e) if e.is_not_found() => {
                        return Err(GateError::not_found(format!(
                            "{}: no handler '{handler}'",
                            field("handler")
                        )));
                    }
                    Err(e) => return Err(e),
                };
                let Some(a) = h.action(action) else {
                    return Err(GateError::not_found(format!(
                        "{}: handler '{handler}' has no action '{action}'",
                        field("action")
                    )));
                };
                let params = s.params.clone().unwrap_or_default();
                crate::bounds::check(&field("params"), &params, self.config().json.params)?;
                if !a.violations(&params).is_empty() {
                    return Err(GateError::invalid(
                        field("params"),
                        "do not match the action's params_schema",
                    ));
                }
                // Kept and shown as every action's are: sensitive values
                // masked. The step's grant binds the call as shown.
                return Ok(PlanStep {
                    approved: false,
                    grants: Vec::new(),
                    params: Some(a.masked(&params)),
                    ..s
                });
            }
            _ => {
                return Err(GateError::invalid(
                    format!("steps[{i}]"),
                    "either {tool, detail} or {handler, action, params}",
                ));
            }
        }
        Ok(PlanStep {
            approved: false,
            grants: Vec::new(),
            ..s
        })
    }

    /// One plan the caller may see.
    pub async fn get_plan(&self, caller: &Caller, id: &str) -> GateResult<Plan> {
        match self.store().get_plan(id).await {
            Ok(p) if caller.may_see(&p.agent) => Ok(p),
            Ok(_) | Err(actiongate_store::StoreError::NotFound) => {
                Err(GateError::not_found(format!("no plan '{id}'")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// One plan the caller may see, once decided or when `wait` runs out.
    pub async fn wait_plan(
        &self,
        caller: &Caller,
        id: &str,
        wait: std::time::Duration,
    ) -> GateResult<Plan> {
        let plan = self.get_plan(caller, id).await?;
        if plan.status != "pending" || wait.is_zero() {
            return Ok(plan);
        }
        // A key revoked meanwhile ends the wait with a 401, as an action's.
        let guard = self.long_poll_guard(caller)?;
        let store = self.store();
        let waited = async {
            Ok(self
                .waiters()
                .wait_until(id, wait, || store.get_plan(id), |p| p.status != "pending")
                .await?)
        };
        self.unless_revoked(guard, waited).await
    }

    /// A page of plans (operators), newest first or, with
    /// `page.oldest_first`, the longest waiting first, in the order they
    /// were made (up to 500, 200 by default), and whether the page was cut
    /// short of `limit` to stay within [`crate::paging::PAGE_BYTES`] (more
    /// may follow however short it is).
    pub async fn list_plans(
        &self,
        caller: &Caller,
        status: Option<String>,
        page: ListPage,
    ) -> GateResult<(Vec<Plan>, bool)> {
        caller.require(Role::Operator)?;
        let page = page.checked(PLANS_PAGE)?;
        if let Some(s) = &status
            && !matches!(s.as_str(), "pending" | "approved" | "denied" | "expired")
        {
            return Err(GateError::invalid(
                "status",
                "pending, approved, denied or expired",
            ));
        }
        let after = page.after.clone();
        let mut plans = self.store().list_plans(status, &page).await?;
        // Plans are listed by when they were made: the page starts after
        // that of the plan named. One naming no plan reads as an empty
        // page, so only then is it looked up, to say so; a plan id that
        // retention deleted still places the page (the time in its id).
        if let Some(after) = after.filter(|_| plans.is_empty()) {
            match self.store().get_plan(&after).await {
                Err(actiongate_store::StoreError::NotFound)
                    if actiongate_store::id_time_ms(actiongate_store::PLAN_PREFIX, &after)
                        .is_none() =>
                {
                    return Err(GateError::not_found(format!(
                        "after: no plan '{after}' to page on from"
                    )));
                }
                Err(e) => return Err(e.into()),
                Ok(_) => {}
            }
        }
        // A plan is up to a request body (1 MiB unless configured): a page
        // of 200 of the largest was hundreds of MiB, built in memory. One
        // cut short says so (`true`).
        let cut = crate::paging::cut_to_bytes(&mut plans);
        Ok((plans, cut))
    }

    /// An operator approves a plan, all of it or the steps at `only`
    /// (indices from 0): each approved step becomes grants of one use in
    /// the plan's session, stored with the approval.
    pub async fn approve_plan(
        &self,
        caller: &Caller,
        id: &str,
        only: Option<Vec<usize>>,
    ) -> GateResult<Plan> {
        caller.require(Role::Operator)?;
        let result = self.approve_plan_once(caller, id, only.clone()).await;
        let by = caller.identity();
        crate::decided_again::sent_again(result, self.get_plan(caller, id), |p| {
            crate::decided_again::plan_holds(p, &by, Some(only.as_deref()))
        })
        .await
    }

    /// [`Gate::approve_plan`], answering a plan decided already with 409.
    async fn approve_plan_once(
        &self,
        caller: &Caller,
        id: &str,
        only: Option<Vec<usize>>,
    ) -> GateResult<Plan> {
        let plan = self.get_plan(caller, id).await?;
        caller.not_for_own(Some(&plan.agent))?;
        if let Some(only) = &only {
            if only.is_empty() {
                return Err(GateError::invalid("steps", "at least one step"));
            }
            if let Some(bad) = only.iter().find(|i| **i >= plan.steps.len()) {
                return Err(GateError::invalid("steps", format!("no step {bad}")));
            }
        }
        // An ended session opens again with no grants: the steps' grants
        // would be revoked by its next action.
        if let Some(s) = self
            .store()
            .get_session(&plan.session, self.idle_before())
            .await?
            && s.status == "ended"
        {
            return Err(GateError::conflict(format!(
                "session '{}' has ended: its grants would be void; the agent asks again                  in an open session (or deny this plan)",
                plan.session
            )));
        }
        let profile = self.profile_of(&plan.agent).await?;
        let expires_at = Some(Utc::now() + self.idle_timeout());
        let mut grants = Vec::new();
        let mut steps = plan.steps.clone();
        self.steps_that_ask(&profile, &plan.session, &mut steps)
            .await?;
        for (i, step) in steps.iter_mut().enumerate() {
            // A step that asks when it runs whatever is granted (an
            // approvals rule's, or guarded in a tainted session) is granted
            // nothing.
            if only.as_ref().is_some_and(|o| !o.contains(&i)) || step.asks.is_some() {
                continue;
            }
            let targets = self.step_targets(&profile, step).await?;
            step.approved = true;
            for target in targets {
                let g = NewGrant {
                    id: crate::grants::new_grant_id(),
                    agent: Some(plan.agent.clone()),
                    target,
                    granted_by: caller.identity(),
                    expires_at,
                    note: Some(format!("plan {} step {i}", plan.id)),
                    session: Some(plan.session.clone()),
                    uses: Some(1),
                };
                step.grants.push(g.id.clone());
                grants.push(g);
            }
        }
        self.store()
            .decide_plan(id.to_owned(), "approved", caller.identity(), steps, grants)
            .await
            .map_err(plan_settled)
    }

    /// Sets each step's `asks`: why it asks a human when it runs whatever
    /// the plan grants (as `crate::policy::decide_in` would decide it): an
    /// approvals rule governs it, or it is guarded and `session` is
    /// tainted, or will be by an earlier step of the plan (one that reads
    /// untrusted content taints the session when it runs).
    async fn steps_that_ask(
        &self,
        profile: &std::sync::Arc<actiongate_policy::Profile>,
        session: &str,
        steps: &mut [PlanStep],
    ) -> GateResult<()> {
        let mut taint: Option<Option<(String, String)>> = None;
        // The first step that will taint the session: (index, action).
        let mut tainting: Option<(usize, String)> = None;
        for (i, step) in steps.iter_mut().enumerate() {
            let (action, rules, (reaches_out, reads_world), scope) =
                self.step_action(profile, step).await?;
            step.asks = if let Some(rule) = rules.first() {
                Some(format!("{} governs it: its approvers decide", rule.label()))
            } else if profile.way_out_call(&action, scope.as_ref(), reaches_out) {
                if taint.is_none() {
                    let t = self
                        .store()
                        .session_taint(session.to_owned(), profile.clone())
                        .await?;
                    taint = Some(t);
                }
                match (taint.as_ref().and_then(Option::as_ref), &tainting) {
                    (Some((by, what)), _) => Some(tainted_reason(session, by, what)),
                    (None, Some((j, what))) => Some(format!(
                        "step {j} (`{what}`) reads untrusted content before it and taints \
                         session '{session}': guarded actions ask"
                    )),
                    (None, None) => None,
                }
            } else {
                None
            };
            if tainting.is_none() && profile.taints_call(&action, scope.as_ref(), reads_world) {
                tainting = Some((i, action));
            }
        }
        Ok(())
    }

    /// The action string of `step`, the approvals rules that govern it (as
    /// they would govern the step's action when it runs), whether it is
    /// a handler action that may reach out (`ActionHints::reaches_out`)
    /// and a handler action's scope.
    async fn step_action(
        &self,
        profile: &actiongate_policy::Profile,
        step: &PlanStep,
    ) -> GateResult<StepAction> {
        if let (Some(tool), Some(detail)) = (&step.tool, &step.detail) {
            let action = actiongate_policy::format_action(tool, detail);
            let rules = governing_rules(profile, &action, None, None);
            return Ok((action, rules, (false, false), None));
        }
        let (Some(handler), Some(action)) = (&step.handler, &step.action) else {
            return Err(GateError::internal());
        };
        let h = self.handler(handler).await?;
        let Some(a) = h.action(action) else {
            return Ok((
                actiongate_policy::format_action(handler, action),
                Vec::new(),
                (true, true),
                None,
            ));
        };
        let params = step.params.clone().unwrap_or_default();
        let action = actiongate_policy::format_action(handler, &a.detail(&params));
        let scope = a.scope(&params);
        let rules = governing_rules(profile, &action, Some(&scope), a.approvals.as_ref());
        Ok((
            action,
            rules,
            (
                actiongate_api::ActionHints::reaches_out(a.decl.hints.as_ref()),
                actiongate_api::ActionHints::reads_world(a.decl.hints.as_ref()),
            ),
            Some(scope),
        ))
    }

    /// What approving `step` grants.
    async fn step_targets(
        &self,
        profile: &actiongate_policy::Profile,
        step: &PlanStep,
    ) -> GateResult<Vec<NewGrantTarget>> {
        if let (Some(tool), Some(detail)) = (&step.tool, &step.detail) {
            // One grant of one use for the step's line as approved: not
            // its commands alone, reordered or repeated.
            let pattern = actiongate_policy::line_pattern(profile, tool, detail)
                .map_err(|e| GateError::conflict(e.reason))?;
            return Ok(vec![crate::grants::line_target(tool, &pattern, "pattern")?]);
        }
        let (Some(handler), Some(action)) = (&step.handler, &step.action) else {
            return Err(GateError::internal());
        };
        let h = self.handler(handler).await?;
        let Some(a) = h.action(action) else {
            return Err(GateError::conflict(format!(
                "handler '{handler}' has no action '{action}'"
            )));
        };
        let params = step.params.clone().unwrap_or_default();
        let given = a.scope(&params);
        // A command line the step runs is granted as a shell tool's line
        // is: one no grant can cover (a redirection to a file, a command
        // substituted) is refused, saying why, not shown as approved and
        // then asked when it runs.
        if let Some(line) = given
            .get(actiongate_policy::SHELL_SCOPE_KEY)
            .and_then(Value::as_str)
        {
            actiongate_policy::line_pattern(profile, "bash", line)
                .map_err(|e| GateError::conflict(e.reason))?;
        }
        // Exactly the step's values: a `*` the agent wrote is a `*`.
        let mut scope = actiongate_policy::literal_scope(&given);
        // And exactly the step's call: this action with these params (as
        // shown), not any call its permission's scope admits.
        scope.insert(
            actiongate_policy::CALL_SCOPE_KEY.to_owned(),
            actiongate_policy::call_scope_value(action, &a.masked(&params)),
        );
        Ok(vec![NewGrantTarget::Permission {
            handler: handler.clone(),
            permission: a.decl.permission.clone(),
            scope,
        }])
    }

    /// An operator denies a plan.
    pub async fn deny_plan(&self, caller: &Caller, id: &str) -> GateResult<Plan> {
        caller.require(Role::Operator)?;
        let plan = self.get_plan(caller, id).await?;
        let result = self
            .store()
            .decide_plan(
                id.to_owned(),
                "denied",
                caller.identity(),
                plan.steps,
                Vec::new(),
            )
            .await
            .map_err(plan_settled);
        let by = caller.identity();
        crate::decided_again::sent_again(result, self.get_plan(caller, id), |p| {
            crate::decided_again::plan_holds(p, &by, None)
        })
        .await
    }

    /// What ran, as the agent's runtime reports it: matched against the
    /// gate's decisions; with none covering it, `action.undecided` is raised.
    pub async fn report_run(&self, caller: &Caller, run: ReportRun) -> GateResult<RunMatched> {
        let agent = caller.agent_id()?.to_owned();
        validate_origin(run.session.as_deref(), run.runtime.as_deref())?;
        validate_tool(&run.tool)?;
        check_len("detail", Some(&run.detail), MAX_DETAIL)?;
        // The action it names is looked up, and kept with an undecided
        // run's event: an action id, nothing else of any size.
        if run
            .action
            .as_deref()
            .is_some_and(|id| uuid::Uuid::try_parse(id).is_err())
        {
            return Err(GateError::invalid("action", "an action id"));
        }
        // A run is activity in its session, and its first may be the
        // session's first: the session is recorded (or owned by another
        // agent: 422) so that the taint below has a row to mark.
        if let Some(s) = &run.session {
            self.touch_session(&agent, s, run.runtime.as_deref())
                .await?;
        }
        // The action named is tried first, and only covers the run if it is
        // that run as decided (same agent, tool, detail and session); each
        // action covers one run.
        let found = self
            .store()
            .claim_run(actiongate_store::RunReport {
                agent: agent.clone(),
                tool: run.tool.clone(),
                detail: run.detail.clone(),
                session: run.session.clone(),
                action: run.action.clone(),
                since: Utc::now() - RUN_LOOKBACK,
            })
            .await?;
        if found.is_none() {
            let action_string = actiongate_policy::format_action(&run.tool, &run.detail);
            // It ran: when it read untrusted content, its session is as
            // tainted as if it had been decided (before the report may be
            // refused for the limit below: that never loosens a session).
            if let Some(session) = &run.session
                && self
                    .profile_of(&agent)
                    .await?
                    .taints_call(&action_string, None, false)
            {
                self.store()
                    .taint_session(
                        session.clone(),
                        UNDECIDED_RUN.to_owned(),
                        action_string.clone(),
                    )
                    .await?;
            }
            self.admit_undecided_run(&agent).await?;
            // Only an undecided run is stored (as its event); refused here,
            // after the taint above, a refusal never loosens a session.
            self.admit_request_bytes(&agent, crate::bounds::json_len(&run, usize::MAX))
                .await?;
            let data = actiongate_store::Json::of(&serde_json::json!({
                "agent": agent,
                "tool": run.tool,
                "detail": run.detail,
                "action_string": action_string,
                "session": run.session,
                "runtime": run.runtime,
                "action": run.action,
            }))
            .map_err(|_| GateError::internal())?;
            self.store().record_undecided(&agent, data).await?;
        }
        Ok(RunMatched {
            decided: found.is_some(),
            action: found,
        })
    }
}

/// A plan decided already is a conflict that says so (the store's answer
/// names no kind of item).
fn plan_settled(e: actiongate_store::StoreError) -> GateError {
    match e {
        actiongate_store::StoreError::WrongState { current } => {
            GateError::conflict(format!("the plan is {current} already"))
        }
        e => e.into(),
    }
}
