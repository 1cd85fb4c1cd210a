//! Grants: standing, expiring permissions that humans give. Creating one
//! approves the pending actions it covers; revoking ends it; an agent may
//! ask whether it holds one.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use actiongate_api::{CreateGrant, PermissionCheck};
use actiongate_policy as policy;
use actiongate_store::{GrantCreated, GrantFilter, GrantRecord, NewGrant, NewGrantTarget};

use crate::actions::validate_agent_id;
use crate::policy::validate_tool;
use crate::{Caller, Gate, GateError, GateResult};

/// A fresh grant id.
pub fn new_grant_id() -> String {
    format!("grt_{}", uuid::Uuid::now_v7().simple())
}

/// Checks a decision-only grant's pattern; the grant target it names.
pub fn tool_target(tool: &str, pattern: &str, pattern_field: &str) -> GateResult<NewGrantTarget> {
    validate_tool(tool)?;
    if pattern.chars().count() > 4096 {
        return Err(GateError::invalid(pattern_field, "at most 4096 characters"));
    }
    policy::ToolPattern::new(tool, pattern)
        .map_err(|e| GateError::invalid(pattern_field, e.to_string()))?;
    Ok(NewGrantTarget::Tool {
        tool: tool.to_owned(),
        pattern: pattern.to_owned(),
        whole_line: false,
    })
}

/// [`tool_target`] for a pattern over the whole line
/// ([`policy::ToolPattern::whole_line`]).
pub fn line_target(tool: &str, pattern: &str, pattern_field: &str) -> GateResult<NewGrantTarget> {
    match tool_target(tool, pattern, pattern_field)? {
        NewGrantTarget::Tool { tool, pattern, .. } => Ok(NewGrantTarget::Tool {
            tool,
            pattern,
            whole_line: true,
        }),
        NewGrantTarget::Permission { .. } => Err(GateError::internal()),
    }
}

/// Whether an agent holds a permission, and by which grant.
#[derive(Debug, Clone)]
pub struct Holding {
    /// The covering grant that lasts longest, if any.
    pub grant: Option<GrantRecordRef>,
}

/// The part of a covering grant an agent is told.
#[derive(Debug, Clone)]
pub struct GrantRecordRef {
    /// Its id.
    pub id: String,
    /// When it ends (`None`: indefinite).
    pub expires_at: Option<DateTime<Utc>>,
}

impl Gate {
    /// Parses an expiry sent over the API (`1h`, `today`, `indefinite`,
    /// RFC 3339; exactly the OpenAPI pattern) into its end, counted from now.
    pub fn parse_expires(&self, text: &str, field: &str) -> GateResult<Option<DateTime<Utc>>> {
        policy::parse_wire_expiry(text, Utc::now(), self.config().tz)
            .map(|e| e.expires_at())
            .map_err(|e| GateError::invalid(field, e.to_string()))
    }

    /// An expiry already taken (say, a stored request's ask) counted from
    /// `from`, in the tolerant grammar it may have been taken in.
    pub fn parse_expires_at(
        &self,
        text: &str,
        from: DateTime<Utc>,
        field: &str,
    ) -> GateResult<Option<DateTime<Utc>>> {
        policy::parse_expiry(text, from, self.config().tz)
            .map(|e| e.expires_at())
            .map_err(|e| GateError::invalid(field, e.to_string()))
    }

    /// Checks a handler permission and scope keys; the grant target they name.
    pub async fn permission_target(
        &self,
        handler: &str,
        permission: &str,
        scope: Map<String, Value>,
        scope_field: &str,
    ) -> GateResult<NewGrantTarget> {
        crate::bounds::check_map(scope_field, &scope, self.config().json.scope)?;
        let h = match self.handler(handler).await {
            Ok(h) => h,
            Err(e) if e.is_not_found() => {
                return Err(GateError::not_found(format!("no handler '{handler}'")));
            }
            Err(e) => return Err(e),
        };
        let Some(decl) = h.permissions.get(permission) else {
            return Err(GateError::not_found(format!(
                "handler '{handler}' declares no permission '{permission}'"
            )));
        };
        let known = decl
            .parameters_schema
            .get("properties")
            .and_then(Value::as_object);
        let unknown: Vec<&String> = scope
            .keys()
            .filter(|k| !known.is_some_and(|p| p.contains_key(*k)))
            .collect();
        if let Some(k) = unknown.first() {
            return Err(GateError::invalid(
                format!("{scope_field}.{k}"),
                format!(
                    "permission '{permission}' has no scope key '{k}' in its parameters_schema"
                ),
            ));
        }
        let refused =
            crate::scope_check::scope_violations(&decl.parameters_schema, &scope, scope_field);
        if !refused.is_empty() {
            return Err(GateError::invalid_fields(refused));
        }
        Ok(NewGrantTarget::Permission {
            handler: handler.to_owned(),
            permission: permission.to_owned(),
            scope,
        })
    }

    /// An operator grants a permission (or a tool pattern); the pending
    /// actions it covers are approved in the same transaction.
    pub async fn create_grant(
        &self,
        caller: &Caller,
        body: CreateGrant,
    ) -> GateResult<GrantCreated> {
        caller.require(actiongate_store::Role::Operator)?;
        let key = crate::request_key::request_key(body.idempotency_key(), &body)?;
        let (agent, expires, note, target, (session, uses)) = match body {
            CreateGrant::Permission(g) => {
                let target = self
                    .permission_target(&g.handler, &g.permission, g.scope, "scope")
                    .await?;
                let scoped = crate::sessions::grant_scope("", g.session, g.uses)?;
                (g.agent, g.expires, g.note, target, scoped)
            }
            CreateGrant::Tool(g) => {
                let target = tool_target(&g.tool, &g.pattern, "pattern")?;
                let scoped = crate::sessions::grant_scope("", g.session, g.uses)?;
                (g.agent, g.expires, g.note, target, scoped)
            }
        };
        if let Some(a) = &agent {
            validate_agent_id(a)?;
        }
        let agent = match &session {
            Some(s) => Some(self.session_grant_agent("agent", s, agent).await?),
            None => agent,
        };
        caller.not_for_own(agent.as_deref())?;
        if note.as_ref().is_some_and(|n| n.chars().count() > 4096) {
            return Err(GateError::invalid("note", "at most 4096 characters"));
        }
        let expires_at = self.parse_expires(&expires, "expires")?;
        let new = NewGrant {
            session,
            uses,
            id: new_grant_id(),
            agent,
            target,
            granted_by: caller.identity(),
            expires_at,
            note,
        };
        let created = match key {
            Some(key) => self.store().create_grant_once(new, key).await?,
            None => self.store().create_grant(new, None).await?,
        };
        Ok(created)
    }

    /// A page of grants, newest (or oldest) first: at most 500; and
    /// whether the page was cut short of its limit to stay within
    /// [`crate::paging::PAGE_BYTES`] (a grant's scope is up to
    /// `limits.scope_max_bytes`: more may follow however short it is).
    pub async fn list_grants(
        &self,
        filter: &GrantFilter,
        page: crate::ListPage,
    ) -> GateResult<(Vec<GrantRecord>, bool)> {
        let page = page.checked(crate::paging::MAX_PAGE)?;
        let filter = GrantFilter {
            after: page.after,
            limit: Some(page.limit),
            oldest_first: page.oldest_first,
            ..filter.clone()
        };
        // A filter no grant could match is a mistake to name, not an
        // empty list that reads as "none granted".
        if let Some(agent) = &filter.agent {
            crate::actions::validate_agent_id(agent)?;
        }
        if let Some(handler) = &filter.handler
            && !crate::handler_spec::is_slug(handler, 64)
        {
            return Err(GateError::invalid(
                "handler",
                "a handler id: 1-64 of a-z 0-9 _ -, starting with a letter or digit",
            ));
        }
        let mut grants = self.store().list_grants(&filter).await?;
        let cut = crate::paging::cut_to_bytes(&mut grants);
        Ok((grants, cut))
    }

    /// One grant.
    pub async fn get_grant(&self, id: &str) -> GateResult<GrantRecord> {
        self.store()
            .get_grant(id)
            .await
            .map_err(|e| no_grant(e, id))
    }

    /// Revokes a grant; revoking again answers the revoked grant.
    pub async fn revoke_grant(&self, caller: &Caller, id: &str) -> GateResult<GrantRecord> {
        caller.require(actiongate_store::Role::Operator)?;
        self.store()
            .revoke_grant(id)
            .await
            .map_err(|e| no_grant(e, id))
    }

    /// Whether the calling agent holds `check`'s permission for its scope
    /// now; the covering grant that lasts longest answers.
    pub async fn check_permission(
        &self,
        caller: &Caller,
        check: &PermissionCheck,
    ) -> GateResult<Holding> {
        let agent = caller.agent_id()?;
        crate::bounds::check_map("scope", &check.scope, self.config().json.scope)?;
        let now = Utc::now();
        let grants = self.store().active_grants(agent, &check.handler).await?;
        let req = policy::Request {
            agent,
            tool: &check.handler,
            detail: "",
            permission: Some(policy::PermissionRef {
                handler: &check.handler,
                permission: &check.permission,
                scope: &check.scope,
                // Asked without a call: a grant of one call holds no more.
                call: None,
            }),
        };
        let covering = grants
            .iter()
            .filter(|g| {
                matches!(g.target, policy::GrantTarget::Permission { .. }) && g.covers(&req, now)
            })
            // The longest-lasting grant answers (indefinite first).
            .max_by_key(|g| g.expires_at.map_or(i64::MAX, |t| t.timestamp_millis()));
        Ok(Holding {
            grant: covering.map(|g| GrantRecordRef {
                id: g.id.clone(),
                expires_at: g.expires_at,
            }),
        })
    }
}

/// A missing grant, named.
fn no_grant(e: actiongate_store::StoreError, id: &str) -> GateError {
    match e {
        actiongate_store::StoreError::NotFound => GateError::not_found(format!("no grant '{id}'")),
        other => other.into(),
    }
}
