//! Grant requests (seed 004): an agent asks a human for a permission and
//! may wait for the answer; an operator approves it as asked or narrower
//! (which creates the grant) or denies it; unanswered ones expire, which is
//! not a denial.

use std::time::Duration;

use chrono::Utc;

use actiongate_api::{ApproveRequest, CreateGrantRequest};
use actiongate_policy as policy;
use actiongate_store::{
    GrantRequest, GrantRequestStatus, NewGrant, NewGrantRequest, NewGrantTarget, StoreError,
};

use crate::actions::MAX_TEXT;
use crate::grants::new_grant_id;
use crate::paging::{ListPage, MAX_PAGE};
use crate::{Caller, Gate, GateError, GateResult};

/// What every grant request's id starts with, a UUIDv7 after it.
const GRANT_REQUEST_PREFIX: &str = "grq_";

/// The expiry granted when neither the request nor the approval names one.
pub const DEFAULT_GRANT_EXPIRY: &str = "1h";

fn settled(r: &GrantRequest) -> bool {
    r.status != GrantRequestStatus::Pending
}

/// A lost compare-and-set on a grant request names the grant request.
fn settled_error(e: StoreError) -> GateError {
    match e {
        StoreError::WrongState { current } => GateError::grant_request_settled(current),
        other => other.into(),
    }
}

impl Gate {
    /// An agent asks for a permission; with a `wait`, answered once a human
    /// decided or the wait ran out.
    pub async fn request_grant(
        &self,
        caller: &Caller,
        body: CreateGrantRequest,
        wait: Duration,
    ) -> GateResult<(GrantRequest, bool)> {
        let agent = caller.agent_id()?.to_owned();
        let guard = if wait.is_zero() {
            None
        } else {
            self.long_poll_guard(caller)?
        };
        // A retry of a request stored is answered (and waited on) as it
        // stands, before any limit is counted.
        let key = crate::request_key::request_key(body.idempotency_key.as_deref(), &body)?;
        if let Some(key) = &key
            && let Some(r) = self.store().grant_request_for_key(&agent, key).await?
        {
            return Ok((self.answer_after(guard, r, wait).await?, false));
        }
        if body.reason.len() > MAX_TEXT {
            return Err(GateError::invalid("reason", "at most 4096 bytes"));
        }
        self.permission_target(&body.handler, &body.permission, body.scope.clone(), "scope")
            .await?;
        if let Some(e) = &body.expires {
            self.parse_expires(e, "expires")?;
        }
        let timeout = self.timeout_of(body.timeout.as_deref())?;
        let (session, uses) = crate::sessions::grant_scope("", body.session, body.uses)?;
        // Only the agent's own session (a new one becomes its own).
        if let Some(s) = &session {
            self.touch_session(&agent, s, None).await?;
        }
        let deadline =
            actiongate_store::time::now() + chrono::Duration::from_std(timeout).unwrap_or_default();
        let ticket = self.admit_pending(&agent).await?;
        let new = NewGrantRequest {
            id: format!("{GRANT_REQUEST_PREFIX}{}", uuid::Uuid::now_v7().simple()),
            agent,
            handler: body.handler,
            permission: body.permission,
            scope: body.scope,
            reason: Some(body.reason),
            expires: body.expires,
            deadline,
            session,
            uses,
        };
        let (r, created) = match key {
            Some(key) => self.store().create_grant_request_once(new, key).await?,
            None => (self.store().create_grant_request(new).await?, true),
        };
        drop(ticket);
        self.deadlines_changed().notify_one();
        Ok((self.answer_after(guard, r, wait).await?, created))
    }

    /// `r` as it stands once settled or after `wait`, whichever is first
    /// (at once without a wait); `guard` holds the long-poll's place.
    async fn answer_after(
        &self,
        guard: Option<crate::caller::KeyGuard>,
        r: GrantRequest,
        wait: Duration,
    ) -> GateResult<GrantRequest> {
        if wait.is_zero() || settled(&r) {
            return Ok(r);
        }
        self.unless_revoked(guard, self.wait_grant_request(&r.id, wait))
            .await
    }

    async fn wait_grant_request(&self, id: &str, wait: Duration) -> GateResult<GrantRequest> {
        let store = self.store();
        Ok(self
            .waiters()
            .wait_until(id, wait, || store.get_grant_request(id), settled)
            .await?)
    }

    /// A page of grant requests, newest first or, with
    /// `page.oldest_first`, the longest waiting first (up to 500, 500 by
    /// default): an operator's all, an agent's its own; and whether the
    /// page was cut short of `limit` to stay within
    /// [`crate::paging::PAGE_BYTES`] (more may follow however short it is).
    pub async fn list_grant_requests(
        &self,
        caller: &Caller,
        status: Option<GrantRequestStatus>,
        page: ListPage,
    ) -> GateResult<(Vec<GrantRequest>, bool)> {
        let page = page.checked(MAX_PAGE)?;
        let agent = if caller.sees_all() {
            None
        } else {
            Some(caller.agent_id()?)
        };
        // As for plans and sessions: a page after no request the caller
        // may see is refused, not read as a position (a mistyped cursor
        // would start the list again, and a client paging on loops). One
        // that retention deleted still places the page: requests are
        // listed by id, which it is.
        if let Some(after) = &page.after {
            match self.store().get_grant_request(after).await {
                Ok(r) if caller.may_see(&r.agent) => {}
                Err(StoreError::NotFound)
                    if actiongate_store::id_time_ms(GRANT_REQUEST_PREFIX, after).is_some() => {}
                Ok(_) | Err(StoreError::NotFound) => {
                    return Err(GateError::not_found(format!(
                        "after: no grant request '{after}' to page on from"
                    )));
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut requests = self
            .store()
            .list_grant_requests(agent, status, &page)
            .await?;
        // A request's scope is up to `limits.scope_max_bytes` (16 KiB unless
        // configured): a page of 500 of the largest was 8 MiB or more.
        let cut = crate::paging::cut_to_bytes(&mut requests);
        Ok((requests, cut))
    }

    pub(crate) async fn visible_grant_request(
        &self,
        caller: &Caller,
        id: &str,
    ) -> GateResult<GrantRequest> {
        match self.store().get_grant_request(id).await {
            Ok(r) if caller.may_see(&r.agent) => Ok(r),
            Ok(_) | Err(StoreError::NotFound) => {
                Err(GateError::not_found(format!("no grant request '{id}'")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A grant request the caller may see; with a `wait`, once answered.
    pub async fn get_grant_request(
        &self,
        caller: &Caller,
        id: &str,
        wait: Duration,
    ) -> GateResult<GrantRequest> {
        let guard = if wait.is_zero() {
            None
        } else {
            self.long_poll_guard(caller)?
        };
        let r = self.visible_grant_request(caller, id).await?;
        if wait.is_zero() || settled(&r) {
            return Ok(r);
        }
        self.unless_revoked(guard, self.wait_grant_request(id, wait))
            .await
    }

    /// An operator approves a grant request as asked, or narrower in scope
    /// and shorter in time; the grant approves the pending actions it
    /// covers. Expiries are compared as asked: both counted from the
    /// request's own time, so the expiry asked for, spelled out again,
    /// is never "longer"; the grant then runs from now.
    pub async fn approve_grant_request(
        &self,
        caller: &Caller,
        id: &str,
        body: ApproveRequest,
    ) -> GateResult<GrantRequest> {
        caller.require(actiongate_store::Role::Operator)?;
        let as_asked = body.scope.is_none() && body.expires.is_none();
        let result = self.approve_grant_request_once(caller, id, body).await;
        if !as_asked {
            return result;
        }
        let by = caller.identity();
        crate::decided_again::sent_again(result, self.visible_grant_request(caller, id), |r| {
            crate::decided_again::grant_request_holds(r, &by, true)
        })
        .await
    }

    /// [`Gate::approve_grant_request`], answering a request answered
    /// already with 409.
    async fn approve_grant_request_once(
        &self,
        caller: &Caller,
        id: &str,
        body: ApproveRequest,
    ) -> GateResult<GrantRequest> {
        let r = self.visible_grant_request(caller, id).await?;
        caller.not_for_own(Some(&r.agent))?;
        if settled(&r) {
            return Err(GateError::grant_request_settled(r.status.as_str()));
        }
        let scope = match body.scope {
            Some(narrow) => {
                // Every key asked for must still hold within what is granted.
                if !policy::scope_matches(&r.scope, &narrow) {
                    return Err(GateError::invalid(
                        "scope",
                        "must lie within the scope asked for",
                    ));
                }
                narrow
            }
            None => r.scope.clone(),
        };
        let target = self
            .permission_target(&r.handler, &r.permission, scope, "scope")
            .await?;
        let asked = r.expires.as_deref().unwrap_or(DEFAULT_GRANT_EXPIRY);
        let given = body.expires.as_deref().unwrap_or(asked);
        let asked_end = self.parse_expires_at(asked, r.created_at, "expires")?;
        let given_end = self.parse_expires_at(given, r.created_at, "expires")?;
        let longer = match (given_end, asked_end) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(g), Some(a)) => g > a,
        };
        if longer {
            return Err(GateError::invalid(
                "expires",
                format!("may not outlast the expiry asked for ({asked})"),
            ));
        }
        let expires_at = match &body.expires {
            Some(given) => self.parse_expires(given, "expires")?,
            None => self.parse_expires_at(asked, Utc::now(), "expires")?,
        };
        if expires_at.is_some_and(|t| t <= Utc::now()) {
            return Err(GateError::invalid("expires", "is already past"));
        }
        if let Some(session) = &r.session {
            self.refuse_ended(
                session,
                "deny the request; the agent asks again in an open session",
            )
            .await?;
        }
        let grant = NewGrant {
            session: r.session.clone(),
            uses: r.uses,
            id: new_grant_id(),
            agent: Some(r.agent.clone()),
            target: match target {
                t @ NewGrantTarget::Permission { .. } => t,
                NewGrantTarget::Tool { .. } => return Err(GateError::internal()),
            },
            granted_by: caller.identity(),
            expires_at,
            note: r.reason.clone(),
        };
        let (r, _) = self
            .store()
            .approve_grant_request(id, grant)
            .await
            .map_err(settled_error)?;
        Ok(r)
    }

    /// An operator denies a grant request.
    pub async fn deny_grant_request(
        &self,
        caller: &Caller,
        id: &str,
        reason: Option<String>,
    ) -> GateResult<GrantRequest> {
        caller.require(actiongate_store::Role::Operator)?;
        if reason.as_ref().is_some_and(|r| r.len() > MAX_TEXT) {
            return Err(GateError::invalid("reason", "at most 4096 bytes"));
        }
        self.visible_grant_request(caller, id).await?;
        let result = self
            .store()
            .deny_grant_request(id, caller.identity(), reason)
            .await
            .map_err(settled_error);
        let by = caller.identity();
        crate::decided_again::sent_again(result, self.visible_grant_request(caller, id), |r| {
            crate::decided_again::grant_request_holds(r, &by, false)
        })
        .await
    }
}
