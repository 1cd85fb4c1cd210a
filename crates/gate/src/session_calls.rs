//! Sessions as callers see them: the one an action names touched (begun or
//! seen again), listed a page at a time, read, and ended.

use actiongate_api::sessions::Session;
use actiongate_store::SessionFilter;
use chrono::{DateTime, Utc};

use crate::actions::validate_agent_id;
use crate::paging::ListPage;
use crate::plans::SESSIONS_PAGE;
use crate::{Caller, Gate, GateError, GateResult};

impl Gate {
    /// How long a session may stay idle (`sessions.idle_timeout`).
    pub fn idle_timeout(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.config().session_idle).unwrap_or(chrono::Duration::hours(8))
    }

    /// Before this instant, a session last seen then is idle.
    pub fn idle_before(&self) -> DateTime<Utc> {
        Utc::now() - self.idle_timeout()
    }

    /// Records that the caller acts in `session` now (see
    /// `Store::touch_session`); another agent's session is a conflict.
    pub async fn touch_session(
        &self,
        agent: &str,
        session: &str,
        runtime: Option<&str>,
    ) -> GateResult<Session> {
        match self
            .store()
            .touch_session(
                agent.to_owned(),
                session.to_owned(),
                runtime.map(str::to_owned),
                self.idle_before(),
            )
            .await
        {
            Ok(s) => {
                // A new session goes idle at a time the sweeper must know of.
                if s.first_seen == s.last_seen {
                    self.deadlines_changed().notify_one();
                }
                Ok(s)
            }
            Err(actiongate_store::StoreError::Conflict(m)) => Err(GateError::invalid("session", m)),
            Err(e) => Err(e.into()),
        }
    }

    /// A page of the sessions the caller may see (an agent its own),
    /// newest first or, with `page.oldest_first`, oldest first by when they
    /// began; only `agent`'s and only `active` or `ended` ones when asked.
    /// `page.after` is a session id, so any the runtime chose pages.
    pub async fn list_sessions(
        &self,
        caller: &Caller,
        status: Option<String>,
        agent: Option<String>,
        mut page: ListPage,
        began: Option<String>,
    ) -> GateResult<Vec<Session>> {
        let after = page.after.take();
        if let Some(after) = &after {
            crate::sessions::validate_stored_session("after", after)?;
        }
        let after_began = match &began {
            None => None,
            Some(t) => Some(
                DateTime::parse_from_rfc3339(t)
                    .map_err(|_| {
                        GateError::invalid(
                            "began",
                            "an RFC 3339 time (with after: the first_seen of that session)",
                        )
                    })?
                    .with_timezone(&Utc),
            ),
        };
        let mut page = page.checked(SESSIONS_PAGE)?;
        page.after = after.clone();
        let active = match status.as_deref() {
            None => None,
            Some("active") => Some(true),
            Some("ended") => Some(false),
            Some(_) => return Err(GateError::invalid("status", "active or ended")),
        };
        if let Some(agent) = &agent {
            validate_agent_id(agent)?;
        }
        let agent = if caller.sees_all() {
            agent
        } else {
            let own = caller.agent_id()?;
            if agent.as_deref().is_some_and(|a| a != own) {
                return Ok(Vec::new());
            }
            Some(own.to_owned())
        };
        let filter = SessionFilter {
            agent,
            active,
            after_began,
        };
        let sessions = self
            .store()
            .list_sessions(filter, page, self.idle_before())
            .await?;
        // A cursor naming no session (or one the caller may not see) reads
        // as an empty page: only then is it looked up, to say so. One
        // placed by its time needs no session.
        if let Some(after) = after.filter(|_| sessions.is_empty() && began.is_none()) {
            let owner = self.store().session_owner(&after).await?;
            if !owner.is_some_and(|o| caller.may_see(&o)) {
                return Err(GateError::not_found(format!(
                    "after: no session '{after}' to page on from"
                )));
            }
        }
        Ok(sessions)
    }

    /// One session the caller may see.
    pub async fn get_session(&self, caller: &Caller, id: &str) -> GateResult<Session> {
        crate::sessions::validate_stored_session("id", id)?;
        match self.store().get_session(id, self.idle_before()).await? {
            Some(s) if caller.may_see(&s.agent) => Ok(s),
            _ => Err(GateError::not_found(format!("no session '{id}'"))),
        }
    }

    /// Ends a session (its agent or an operator): its grants are void.
    pub async fn end_session(&self, caller: &Caller, id: &str) -> GateResult<Session> {
        let s = self.get_session(caller, id).await?;
        if !caller.sees_all() && caller.agent_id()? != s.agent {
            return Err(GateError::not_found(format!("no session '{id}'")));
        }
        Ok(self
            .store()
            .end_session(id.to_owned(), caller.identity(), self.idle_before())
            .await?)
    }
}
