//! Grants: standing permissions given by humans. Creating one approves, in
//! the same transaction, every pending action it covers.

use std::collections::HashMap;
use std::sync::Arc;

use actiongate_policy as policy;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sqlx::{QueryBuilder, Sqlite, SqliteConnection};

use crate::SqliteStore;
use crate::actions::{self, Transition};
use crate::error::StoreError;
use crate::events::{self, NewEvent};
use crate::grant_governs::handler_governs_on;
pub(crate) use crate::grant_governs::{asked_under_rules, handler_action_governs};
use crate::grant_key::{keyed_query, repeated};
pub use crate::grant_list::GrantFilter;
pub(crate) use crate::grant_list::list_query;
use crate::grant_scan::{Candidates, candidates_query};
use crate::request_key::RequestKey;
use crate::time::{from_ms, now, opt_from_ms, to_ms};
use actiongate_api::model::{Action, ActionStatus, GrantRecord, Json};

/// What a new grant permits.
#[derive(Debug, Clone)]
pub enum NewGrantTarget {
    /// A handler's permission within a scope.
    Permission {
        /// Handler id.
        handler: String,
        /// Permission name.
        permission: String,
        /// Scope values (globs allowed).
        scope: Map<String, Value>,
    },
    /// Decision-only actions of a tool whose detail matches a pattern.
    Tool {
        /// Tool name.
        tool: String,
        /// Full-match pattern (validated by the caller).
        pattern: String,
        /// The pattern is for a shell tool's whole line, not each simple
        /// command of it ([`policy::ToolPattern::whole_line`]).
        whole_line: bool,
    },
}

/// A grant about to be stored.
#[derive(Debug, Clone)]
pub struct NewGrant {
    /// Grant id.
    pub id: String,
    /// For this agent only, or any agent.
    pub agent: Option<String>,
    /// What it permits.
    pub target: NewGrantTarget,
    /// Who grants it.
    pub granted_by: String,
    /// When it stops counting.
    pub expires_at: Option<DateTime<Utc>>,
    /// A note.
    pub note: Option<String>,
    /// Only within this session (void once it ends).
    pub session: Option<String>,
    /// Void after this many allowed actions.
    pub uses: Option<i64>,
}

impl NewGrant {
    /// Whether it is scoped to a session or a count: such a grant is not
    /// cached, allows only what is asked after it (it approves no pending
    /// action but the one it is made with), and is read by
    /// [`crate::Store::scoped_grants`].
    pub fn is_scoped(&self) -> bool {
        self.session.is_some() || self.uses.is_some()
    }
}

/// Approve this pending action first, in the same transaction (the
/// operator's "approve and remember").
#[derive(Debug, Clone)]
pub struct ApproveFirst {
    /// The action.
    pub action_id: String,
    /// The operator's identity (`key:<id>`, `telegram:<user id>`, …).
    pub decided_by: String,
    /// Their note.
    pub note: Option<String>,
    /// The person deciding (their name), or the identity when it is
    /// nobody's: recorded as the action's approval, as any approval is.
    pub person: String,
    /// The person as the approver checks read them: refused (409) when
    /// they changed since (see [`crate::PersonSeen`]).
    pub seen: crate::PersonSeen,
    /// The channel it came through (api, page, cli, a chat, mcp).
    pub channel: String,
    /// Whether the action reads untrusted content under its agent's
    /// profile: approving it taints its session.
    pub taints: bool,
}

impl ApproveFirst {
    /// The approval it records, made now: one person's, which settles an
    /// action that needs one.
    pub(crate) fn decision(&self) -> crate::approvals::TeamDecision {
        crate::approvals::TeamDecision {
            approve: true,
            entry: actiongate_api::teams::ApprovalEntry {
                who: self.person.clone(),
                by: self.decided_by.clone(),
                channel: self.channel.clone(),
                at: now(),
            },
            required: 1,
            note: self.note.clone(),
            edit: None,
            // The grant is made for the request as asked: never for an
            // action someone edited.
            seen: Some(actiongate_api::teams::Seen::Asked),
            lapsed: Vec::new(),
            taints: self.taints,
            people_seen: vec![self.seen.clone()],
        }
    }
}

/// What creating a grant did.
#[derive(Debug, Clone)]
pub struct GrantCreated {
    /// The grant.
    pub grant: GrantRecord,
    /// The action approved first, when asked to.
    pub approved_first: Option<Action>,
    /// Other pending actions the grant covered and approved.
    pub approved: Vec<Action>,
    /// Made before under the same idempotency key: nothing was changed.
    pub repeated: bool,
}

/// The grant columns, in the order [`from_row`] reads them, as a literal
/// for `concat!`.
macro_rules! grant_columns {
    () => {
        "id, agent, handler, permission, scope, tool, pattern, whole_line, granted_by, granted_at, expires_at, revoked_at, note, session, uses, uses_left"
    };
}
pub(crate) use grant_columns;

pub(crate) fn from_row(row: &impl crate::row::Cols) -> Result<GrantRecord, StoreError> {
    let scope: Option<String> = row.try_get("scope")?;
    let expires_at = opt_from_ms(row.try_get("expires_at")?);
    let revoked_at = opt_from_ms(row.try_get("revoked_at")?);
    let uses_left: Option<i64> = row.try_get("uses_left")?;
    let at = now();
    Ok(GrantRecord {
        id: row.try_get("id")?,
        agent: row.try_get("agent")?,
        handler: row.try_get("handler")?,
        permission: row.try_get("permission")?,
        scope: scope.map(|s| serde_json::from_str(&s)).transpose()?,
        tool: row.try_get("tool")?,
        pattern: row.try_get("pattern")?,
        whole_line: row.try_get::<i64>("whole_line")? != 0,
        granted_by: row.try_get("granted_by")?,
        granted_at: from_ms(row.try_get("granted_at")?),
        expires_at,
        revoked_at,
        note: row.try_get("note")?,
        active: revoked_at.is_none()
            && expires_at.is_none_or(|t| t > at)
            && uses_left.is_none_or(|n| n > 0),
        session: row.try_get("session")?,
        uses: row.try_get("uses")?,
        uses_left,
    })
}

/// The policy crate's view of a stored grant.
pub fn to_policy(g: &GrantRecord) -> Result<policy::Grant, StoreError> {
    let target = match (&g.handler, &g.permission, &g.scope, &g.tool, &g.pattern) {
        (Some(handler), Some(permission), Some(scope), _, _) => NewGrantTarget::Permission {
            handler: handler.clone(),
            permission: permission.clone(),
            scope: scope.clone(),
        },
        (_, _, _, Some(tool), Some(pattern)) => NewGrantTarget::Tool {
            tool: tool.clone(),
            pattern: pattern.clone(),
            whole_line: g.whole_line,
        },
        _ => return Err(StoreError::Corrupt(format!("grant {} has no target", g.id))),
    };
    Ok(policy::Grant {
        id: g.id.clone(),
        agent: g.agent.clone(),
        target: target.into_policy()?,
        expires_at: g.expires_at,
        revoked_at: g.revoked_at,
    })
}

impl NewGrantTarget {
    /// The policy crate's view of this target; a pattern it cannot build
    /// (one stored edited by hand) is corrupt.
    pub(crate) fn into_policy(self) -> Result<policy::GrantTarget, StoreError> {
        Ok(match self {
            NewGrantTarget::Permission {
                handler,
                permission,
                scope,
            } => policy::GrantTarget::Permission {
                handler,
                permission,
                scope,
            },
            NewGrantTarget::Tool {
                tool,
                pattern,
                whole_line,
            } => policy::GrantTarget::Tool(
                if whole_line {
                    policy::ToolPattern::whole_line(&tool, &pattern)
                } else {
                    policy::ToolPattern::new(&tool, &pattern)
                }
                .map_err(|e| StoreError::Corrupt(e.to_string()))?,
            ),
        })
    }
}

pub(crate) fn grant_event(kind: &'static str, g: &GrantRecord) -> Result<NewEvent, StoreError> {
    Ok(NewEvent {
        kind,
        agent: g.agent.clone(),
        action_id: None,
        grant_id: Some(g.id.clone()),
        data: Json::of(g)?,
    })
}

/// What a new grant's target puts in each column.
pub(crate) struct TargetCols {
    pub(crate) handler: Option<String>,
    pub(crate) permission: Option<String>,
    pub(crate) scope: Option<String>,
    pub(crate) tool: Option<String>,
    pub(crate) pattern: Option<String>,
    pub(crate) whole_line: i64,
}

impl NewGrantTarget {
    /// The columns that store this target.
    pub(crate) fn cols(&self) -> TargetCols {
        match self {
            NewGrantTarget::Permission {
                handler,
                permission,
                scope,
            } => TargetCols {
                handler: Some(handler.clone()),
                permission: Some(permission.clone()),
                scope: Some(Value::Object(scope.clone()).to_string()),
                tool: None,
                pattern: None,
                whole_line: 0,
            },
            NewGrantTarget::Tool {
                tool,
                pattern,
                whole_line,
            } => TargetCols {
                handler: None,
                permission: None,
                scope: None,
                tool: Some(tool.clone()),
                pattern: Some(pattern.clone()),
                whole_line: i64::from(*whole_line),
            },
        }
    }
}

/// The transition of a pending action grant `id` approves.
pub(crate) fn approve_by_grant(id: &str) -> Transition {
    Transition {
        from: &[ActionStatus::Pending],
        to: ActionStatus::Approved,
        decided_by: Some(format!("grant:{id}")),
        note: None,
        outcome: None,
        event: "action.approved",
    }
}

/// Runs `f` on `action` as the policy sees a request.
fn as_request<T>(action: &Action, f: impl FnOnce(&policy::Request<'_>) -> T) -> T {
    let empty = Map::new();
    let permission = match (&action.handler, &action.permission) {
        (Some(handler), Some(permission)) => Some(policy::PermissionRef {
            handler,
            permission,
            scope: action.scope.as_ref().unwrap_or(&empty),
            call: action.action.as_deref().zip(action.params.as_ref()),
        }),
        _ => None,
    };
    f(&policy::Request {
        agent: &action.agent,
        tool: &action.tool,
        detail: &action.detail,
        permission,
    })
}

/// Whether `grant` covers pending `action` at `at`.
pub(crate) fn covers(grant: &policy::Grant, action: &Action, at: DateTime<Utc>) -> bool {
    as_request(action, |req| grant.covers(req, at))
}

/// Whether `action` would be allowed as a new request with `grant` under
/// `profile` (the agent's): a profile deny still wins.
pub(crate) fn allows(
    grant: &policy::Grant,
    profile: &policy::Profile,
    action: &Action,
    at: DateTime<Utc>,
) -> bool {
    as_request(action, |req| {
        policy::decide(profile, std::slice::from_ref(grant), req, at).verdict
            == policy::Verdict::Allow
    })
}

/// `agent`'s profile from its stored text (`None`: it has none of its own,
/// so `default`); `None` when neither is usable (a stored one edited by
/// hand).
pub(crate) fn compile_profile(
    agent: &str,
    text: Option<String>,
    default: Option<&Arc<policy::Profile>>,
) -> Option<Arc<policy::Profile>> {
    let Some(text) = text else {
        return default.cloned();
    };
    let compiled = serde_json::from_str::<policy::ProfileSpec>(&text)
        .map_err(|e| e.to_string())
        .and_then(|spec| policy::Profile::from_spec(spec).map_err(|e| e.to_string()));
    match compiled {
        Ok(p) => Some(Arc::new(p)),
        Err(e) => {
            tracing::error!(agent, error = %e, "stored profile does not compile");
            None
        }
    }
}

/// Refuses a grant for `session` when it has ended (`ended_at`, as read in
/// the transaction storing the grant): ending it revokes its grants, so
/// one stored after would outlive it, void at its next action; read before
/// the grant is written, an end committed in between would go unseen.
pub(crate) fn refuse_ended(session: &str, ended_at: Option<Option<i64>>) -> Result<(), StoreError> {
    match ended_at {
        Some(Some(_)) => Err(StoreError::Conflict(format!(
            "session '{session}' has ended: a grant for it would be void when it opens again"
        ))),
        _ => Ok(()),
    }
}

/// The statement storing `new`, returning its row.
pub(crate) fn insert_query<DB>(new: &NewGrant, key: Option<&RequestKey>) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> Option<String>: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> Option<i64>: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let cols = new.target.cols();
    let mut q: QueryBuilder<DB> = QueryBuilder::new(
        "INSERT INTO grants (id, agent, handler, permission, scope, tool, pattern, whole_line, \
         granted_by, granted_at, expires_at, note, session, uses, uses_left, idempotency_key, \
         request_hash) VALUES (",
    );
    q.separated(", ")
        .push_bind(new.id.clone())
        .push_bind(new.agent.clone())
        .push_bind(cols.handler)
        .push_bind(cols.permission)
        .push_bind(cols.scope)
        .push_bind(cols.tool)
        .push_bind(cols.pattern)
        .push_bind(cols.whole_line)
        .push_bind(new.granted_by.clone())
        .push_bind(to_ms(now()))
        .push_bind(new.expires_at.map(to_ms))
        .push_bind(new.note.clone())
        .push_bind(new.session.clone())
        .push_bind(new.uses)
        .push_bind(new.uses)
        .push_bind(key.map(|k| k.key.clone()))
        .push_bind(key.map(|k| k.request_hash.clone()));
    q.push(")")
        .push(crate::grant_key::on_conflict(key))
        .push(concat!(" RETURNING ", grant_columns!()));
    q
}

/// Stores a grant and approves the pending actions it covers.
pub(crate) async fn create_on(
    conn: &mut SqliteConnection,
    new: NewGrant,
    first: Option<ApproveFirst>,
    key: Option<&RequestKey>,
    default_profile: Option<&Arc<policy::Profile>>,
    candidates: &Candidates,
) -> Result<GrantCreated, StoreError> {
    if let Some(key) = key
        && let Some(row) = keyed_query::<Sqlite>(&new.granted_by, key)
            .build()
            .fetch_optional(&mut *conn)
            .await?
    {
        return repeated(&row, key);
    }
    let approved_first = match first {
        Some(first) => {
            let (decided, event) =
                crate::approvals::decide_on(conn, &first.action_id, &first.decision()).await?;
            crate::approvals::settled_by_one(&decided)?;
            events::insert_on(conn, &event).await?;
            Some(decided.action)
        }
        None => None,
    };
    if let Some(session) = &new.session {
        let ended: Option<Option<i64>> =
            sqlx::query_scalar("SELECT ended_at FROM sessions WHERE id = ?")
                .bind(session)
                .fetch_optional(&mut *conn)
                .await?;
        refuse_ended(session, ended)?;
    }
    // One writer at a time: the key was looked up above in this
    // transaction, so the insert cannot meet it.
    let row = insert_query::<Sqlite>(&new, key)
        .build()
        .fetch_one(&mut *conn)
        .await?;
    let grant = from_row(&row)?;
    events::insert_on(conn, &grant_event("grant.created", &grant)?).await?;
    let approved = approve_covered_on(conn, &grant, default_profile, candidates).await?;
    Ok(GrantCreated {
        grant,
        approved_first,
        approved,
        repeated: false,
    })
}

/// Approves every pending action `grant` covers, recording it as decider,
/// where the grant would allow it as a new request: the agent's profile
/// (its own as stored now, else `default_profile`) is judged first, so
/// what it denies stays pending for a human. Actions past their deadline
/// are left to expire. Only `candidates` are looked at (see `grant_scan`).
async fn approve_covered_on(
    conn: &mut SqliteConnection,
    grant: &GrantRecord,
    default_profile: Option<&Arc<policy::Profile>>,
    candidates: &Candidates,
) -> Result<Vec<Action>, StoreError> {
    // A grant for a session or a count allows what comes after it only.
    if grant.session.is_some() || grant.uses.is_some() {
        return Ok(Vec::new());
    }
    let pg = to_policy(grant)?;
    let Some(mut q) = candidates_query(grant.into(), candidates) else {
        return Ok(Vec::new());
    };
    let rows = q.build().fetch_all(&mut *conn).await?;
    let at = now();
    let mut approved = Vec::new();
    let mut profiles: HashMap<String, Option<Arc<policy::Profile>>> = HashMap::new();
    let mut specs: HashMap<String, Option<String>> = HashMap::new();
    for row in &rows {
        let action = actions::from_row(row)?;
        if !covers(&pg, &action, at) {
            continue;
        }
        let profile = match profiles.get(&action.agent) {
            Some(p) => p.clone(),
            None => {
                let p = profile_on(conn, &action.agent, default_profile).await?;
                profiles.insert(action.agent.clone(), p.clone());
                p
            }
        };
        // No usable profile: nothing is approved on the agent's behalf.
        let Some(profile) = profile else { continue };
        if !allows(&pg, &profile, &action, at) {
            continue;
        }
        // An approvals rule (a count of people, or who may approve)
        // governs it: one operator's grant does not settle it.
        if !profile
            .approval_rules_for(&action.action_string, action.scope.as_ref())
            .is_empty()
            || asked_under_rules(&action)
            || handler_governs_on(conn, &action, &mut specs).await?
        {
            continue;
        }
        // A guarded action of a tainted session is a human's to decide.
        if crate::sessions::held_by_taint_on(conn, &profile, &action).await? {
            continue;
        }
        match actions::transition_on(conn, &action.id, &approve_by_grant(&grant.id)).await {
            Ok(action) => {
                if profile.taints_call(
                    &action.action_string,
                    action.scope.as_ref(),
                    action.reads_world(),
                ) {
                    crate::sessions::mark_taint_on(conn, &action).await?;
                }
                approved.push(action);
            }
            // Its deadline passed meanwhile: it expires instead.
            Err(StoreError::WrongState { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(approved)
}

/// The profile of `agent` as stored now, or `default` when it has none of
/// its own; `None` when neither is usable (a stored one edited by hand).
pub(crate) async fn profile_on(
    conn: &mut SqliteConnection,
    agent: &str,
    default: Option<&Arc<policy::Profile>>,
) -> Result<Option<Arc<policy::Profile>>, StoreError> {
    let text: Option<Option<String>> =
        sqlx::query_scalar("SELECT profile FROM agents WHERE id = ?")
            .bind(agent)
            .fetch_optional(&mut *conn)
            .await?;
    Ok(compile_profile(agent, text.flatten(), default))
}

impl SqliteStore {
    /// Stores a grant; approves `first` (if given) and every pending action
    /// the grant covers, all in one transaction.
    pub async fn create_grant(
        &self,
        new: NewGrant,
        first: Option<ApproveFirst>,
    ) -> Result<GrantCreated, StoreError> {
        self.create_grant_on(new, first, None).await
    }

    /// Stores a grant under an operator's idempotency key: the same key
    /// with the same request again answers the grant made the first time
    /// (`repeated`), with another request a conflict (see `grant_key`).
    pub async fn create_grant_once(
        &self,
        new: NewGrant,
        key: RequestKey,
    ) -> Result<GrantCreated, StoreError> {
        self.create_grant_on(new, None, Some(key)).await
    }

    async fn create_grant_on(
        &self,
        new: NewGrant,
        first: Option<ApproveFirst>,
        key: Option<RequestKey>,
    ) -> Result<GrantCreated, StoreError> {
        let default_profile = self.default_profile.clone();
        let candidates = self.pending_covered(&new).await?;
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let profile = default_profile.as_ref();
                    create_on(conn, new, first, key.as_ref(), profile, &candidates).await
                })
            })
            .await
    }

    /// Revokes a grant; a second revoke returns the revoked grant unchanged.
    pub async fn revoke_grant(&self, id: &str) -> Result<GrantRecord, StoreError> {
        let id = id.to_owned();
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let row = sqlx::query(concat!(
                        "UPDATE grants SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING ",
                        grant_columns!()
                    ))
                    .bind(to_ms(now()))
                    .bind(&id)
                    .fetch_optional(&mut *conn)
                    .await?;
                    match row {
                        Some(row) => {
                            let grant = from_row(&row)?;
                            events::insert_on(conn, &grant_event("grant.revoked", &grant)?).await?;
                            Ok(grant)
                        }
                        None => {
                            let row = sqlx::query(concat!("SELECT ", grant_columns!(), " FROM grants WHERE id = ?"))
                                .bind(&id)
                                .fetch_optional(&mut *conn)
                                .await?;
                            row.as_ref().map(from_row).transpose()?.ok_or(StoreError::NotFound)
                        }
                    }
                })
            })
            .await
    }

    /// One grant.
    pub async fn get_grant(&self, id: &str) -> Result<GrantRecord, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            grant_columns!(),
            " FROM grants WHERE id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.read)
        .await?;
        row.as_ref()
            .map(from_row)
            .transpose()?
            .ok_or(StoreError::NotFound)
    }

    /// Grants, newest first.
    pub async fn list_grants(&self, f: &GrantFilter) -> Result<Vec<GrantRecord>, StoreError> {
        let rows = list_query::<Sqlite>(f)
            .build()
            .fetch_all(&self.read)
            .await?;
        rows.iter().map(from_row).collect()
    }

    /// Active grants that may apply to `agent` acting on `tool` (a tool
    /// name or a handler id), as the policy crate sees them. Cached until
    /// the next commit that may change grants (see `grant_cache`).
    pub async fn active_grants(
        &self,
        agent: &str,
        tool: &str,
    ) -> Result<Vec<policy::Grant>, StoreError> {
        let generation = match self.grant_cache.get(agent, tool) {
            Ok(grants) => return Ok(grants.as_ref().clone()),
            Err(generation) => generation,
        };
        let rows = sqlx::query(concat!(
            "SELECT ",
            grant_columns!(),
            " FROM grants WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) \
             AND (agent IS NULL OR agent = ?) AND (handler = ? OR tool = ?) \
             AND session IS NULL AND uses_left IS NULL"
        ))
        .bind(to_ms(now()))
        .bind(agent)
        .bind(tool)
        .bind(tool)
        .fetch_all(&self.read)
        .await?;
        let grants = rows
            .iter()
            .map(|r| from_row(r).and_then(|g| self.grant_cache.to_policy(&g)))
            .collect::<Result<Vec<_>, _>>()?;
        self.grant_cache
            .insert(generation, agent, tool, std::sync::Arc::new(grants.clone()));
        Ok(grants)
    }
}
