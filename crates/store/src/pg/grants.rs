//! Grants on Postgres. Creating one approves, in the same transaction,
//! every pending action it covers, judged as the SQLite backend judges
//! them (`grants::covers`, `grants::allows`, the agent's profile as stored
//! now or the default one).
//!
//! Races with other nodes: the covered actions (and the one approved
//! first) are locked in id order (`FOR UPDATE`, which re-checks `pending`
//! against a concurrent decision once it commits), so a decision on
//! another node and the grant never both apply, and two writers that lock
//! several actions (grants, sweeps) never deadlock.
//!
//! A new action that asks was decided on grants read before its insert; a
//! grant committed in between (on any node) would not see it pending and
//! it would not see the grant. So the two take one advisory lock first
//! ([`lock_grants`]): a grant's transaction alone, a new pending action's
//! shared with others like it. Whichever comes second sees the other
//! committed: the grant approves the action, or the insert finds the grant
//! ([`approve_if_granted`]) and lets it approve the action there and then.
//! Grants therefore also never interleave, which keeps their two locking
//! statements from deadlocking on an action committed between them. A
//! grant for a session or a count made on its own takes no part: it
//! allows only actions asked after it ([`only_later`]).
//!
//! The pending actions are judged on a snapshot before the transaction
//! (`grant_scan`, [`Postgres::pending_covered`]): it locks and judges
//! again only those found covered there and those the snapshot did not
//! hold, so the lock that new asks wait for is held for milliseconds, not
//! for as long as judging thousands of pending actions takes.

use std::collections::HashMap;
use std::sync::Arc;

use actiongate_policy as policy;
use sqlx::{PgConnection, Postgres as Pg, QueryBuilder};

use crate::actions::NewAction;
use crate::error::StoreError;
use crate::events::NewEvent;
use crate::grant_key::{keyed_query, repeated};
use crate::grant_scan::{Candidates, Look, covered_query_among};
use crate::grants::{
    ApproveFirst, GrantCreated, GrantFilter, NewGrant, allows, approve_by_grant, asked_under_rules,
    compile_profile, covers, from_row, grant_columns, grant_event, handler_action_governs,
    insert_query, list_query, to_policy,
};
use crate::pg::Postgres;
use crate::pg::actions::transition_on;
use crate::request_key::RequestKey;
use crate::time::{now, to_ms};
use actiongate_api::model::{Action, DecisionResult, GrantRecord};

/// One grant by id, on `conn`.
pub(crate) async fn get_on(
    conn: &mut PgConnection,
    id: &str,
) -> Result<Option<GrantRecord>, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT ",
        grant_columns!(),
        " FROM grants WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// Takes the lock that orders new grants against new pending actions (see
/// the module's header) until the transaction ends: `exclusive` for a
/// grant, shared for a pending action. Take it before any row lock.
pub(crate) async fn lock_grants(
    conn: &mut PgConnection,
    exclusive: bool,
) -> Result<(), StoreError> {
    let sql = if exclusive {
        "SELECT pg_advisory_xact_lock(hashtext('actiongate.grants'))"
    } else {
        "SELECT pg_advisory_xact_lock_shared(hashtext('actiongate.grants'))"
    };
    sqlx::query(sql).execute(conn).await?;
    Ok(())
}

/// Whether `new` (for a session or a count of uses) allows only actions
/// asked after it. Such a grant approves no pending action
/// ([`approve_covered_on`]) and a new pending action never looks for it
/// ([`approve_if_granted`]); made without an action approved first, it
/// locks no action row either. There is nothing to order, and it takes no
/// lock: a burst of them (or of plans' step grants) does not queue behind
/// one another, nor block the pending actions asked meanwhile.
pub(crate) fn only_later(new: &NewGrant) -> bool {
    new.session.is_some() || new.uses.is_some()
}

/// Turns `new`, allowed by grants this daemon cached, into an asked action
/// when one of them is no longer in force (revoked or expired, maybe on
/// another daemon whose notification has not arrived yet); whether it did.
/// Read in the transaction that stores the action: a revocation committed
/// before an action's request arrived is always seen.
pub(crate) async fn lapsed_on(
    conn: &mut PgConnection,
    new: &mut NewAction,
) -> Result<bool, StoreError> {
    if new.relies_on.is_empty() || new.decision.result != DecisionResult::Allow {
        return Ok(false);
    }
    let live: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM grants WHERE id = ANY($1) AND revoked_at IS NULL \
         AND (expires_at IS NULL OR expires_at > $2)",
    )
    .bind(&new.relies_on)
    .bind(to_ms(now()))
    .fetch_all(&mut *conn)
    .await?;
    let Some(gone) = new.relies_on.iter().find(|id| !live.contains(id)).cloned() else {
        return Ok(false);
    };
    crate::sessions::lapsed(new, &gone);
    Ok(true)
}

/// Approves `pending`, an action just inserted (under the shared lock of
/// [`lock_grants`]), when an active grant covers it and would allow it as
/// a new request, as that grant would had it been made a moment later:
/// the approval and its event, or `None`.
pub(crate) async fn approve_if_granted(
    conn: &mut PgConnection,
    pending: &Action,
    default_profile: Option<&Arc<policy::Profile>>,
) -> Result<Option<(Action, NewEvent)>, StoreError> {
    // An approvals rule (a count of people, or who may approve) governs
    // it: the gate asked although a grant covers it, and a grant made
    // meanwhile settles it no more than one made before.
    if asked_under_rules(pending) {
        return Ok(None);
    }
    let rows = sqlx::query(concat!(
        "SELECT ",
        grant_columns!(),
        " FROM grants WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1) \
         AND (agent IS NULL OR agent = $2) AND (handler = $3 OR tool = $3) \
         AND session IS NULL AND uses_left IS NULL ORDER BY id"
    ))
    .bind(to_ms(now()))
    .bind(&pending.agent)
    .bind(&pending.tool)
    .fetch_all(&mut *conn)
    .await?;
    let at = now();
    let mut profile = None;
    for row in &rows {
        let grant = to_policy(&from_row(row)?)?;
        if !covers(&grant, pending, at) {
            continue;
        }
        if profile.is_none() {
            profile = Some(profile_on(conn, &pending.agent, default_profile).await?);
        }
        // No usable profile: nothing is approved on the agent's behalf.
        let Some(Some(p)) = &profile else {
            return Ok(None);
        };
        // An approvals rule of the profile as it is now governs it.
        if !p
            .approval_rules_for(&pending.action_string, pending.scope.as_ref())
            .is_empty()
        {
            return Ok(None);
        }
        if !allows(&grant, p, pending, at) {
            continue;
        }
        // A guarded action of a tainted session is a human's to decide,
        // whichever grant covers it (as where a new grant settles pending
        // actions).
        if crate::pg::sessions::held_by_taint_on(conn, p, pending).await? {
            return Ok(None);
        }
        let t = approve_by_grant(&grant.id);
        let approved = transition_on(conn, &pending.id, &t).await?;
        if p.taints_call(
            &approved.action_string,
            approved.scope.as_ref(),
            approved.reads_world(),
        ) {
            crate::pg::sessions::mark_taint_on(conn, &approved).await?;
        }
        let event = crate::actions::event_for(&approved, t.event)?;
        return Ok(Some((approved, event)));
    }
    Ok(None)
}

/// [`handler_action_governs`] for pending `action`, its handler's spec
/// read once per handler into `specs`.
async fn handler_governs_on(
    conn: &mut PgConnection,
    action: &Action,
    specs: &mut HashMap<String, Option<String>>,
) -> Result<bool, StoreError> {
    let Some(handler) = action.handler.as_deref() else {
        return Ok(false);
    };
    if !specs.contains_key(handler) {
        let spec: Option<String> = sqlx::query_scalar("SELECT spec FROM handlers WHERE id = $1")
            .bind(handler)
            .fetch_optional(&mut *conn)
            .await?;
        specs.insert(handler.to_owned(), spec);
    }
    Ok(handler_action_governs(
        specs.get(handler).and_then(Option::as_deref),
        action,
    ))
}

/// The profile of `agent` as stored now, or `default` when it has none of
/// its own; `None` when neither is usable.
async fn profile_on(
    conn: &mut PgConnection,
    agent: &str,
    default: Option<&Arc<policy::Profile>>,
) -> Result<Option<Arc<policy::Profile>>, StoreError> {
    let text: Option<Option<String>> =
        sqlx::query_scalar("SELECT profile FROM agents WHERE id = $1")
            .bind(agent)
            .fetch_optional(&mut *conn)
            .await?;
    Ok(compile_profile(agent, text.flatten(), default))
}

/// Stores a grant, approves `first` and what the grant covers; the events
/// of each change go to `events`, in order, for the caller's commit.
pub(crate) async fn create_on(
    conn: &mut PgConnection,
    new: NewGrant,
    first: Option<ApproveFirst>,
    key: Option<&RequestKey>,
    default_profile: Option<&Arc<policy::Profile>>,
    candidates: &Candidates,
    events: &mut Vec<NewEvent>,
) -> Result<GrantCreated, StoreError> {
    if let Some(key) = key
        && let Some(row) = keyed_query::<Pg>(&new.granted_by, key)
            .build()
            .fetch_optional(&mut *conn)
            .await?
    {
        return repeated(&row, key);
    }
    if first.is_some() || !only_later(&new) {
        lock_grants(conn, true).await?;
    }
    if let Some(first) = &first
        && let Some(mut q) =
            covered_query_among::<Pg>((&new).into(), Some(&first.action_id), among(candidates))
    {
        // The action approved first and what the grant may cover, locked
        // together in id order before any is changed: locked one after the
        // other, a sweep or another grant holding some of the same rows
        // could each wait for the other.
        q.push(" FOR UPDATE");
        q.build().execute(&mut *conn).await?;
    }
    let approved_first = match first {
        Some(first) => {
            let (decided, event) =
                crate::pg::approvals::decide_on(conn, &first.action_id, &first.decision()).await?;
            crate::approvals::settled_by_one(&decided)?;
            events.push(event);
            Some(decided.action)
        }
        None => None,
    };
    if let Some(session) = &new.session {
        // Shared-locked until commit: an end of the session waits for the
        // grant and then revokes it, or ends first and is seen here.
        let ended: Option<Option<i64>> =
            sqlx::query_scalar("SELECT ended_at FROM sessions WHERE id = $1 FOR SHARE")
                .bind(session)
                .fetch_optional(&mut *conn)
                .await?;
        crate::grants::refuse_ended(session, ended)?;
    }
    let row = insert_query::<Pg>(&new, key)
        .build()
        .fetch_optional(&mut *conn)
        .await?;
    let row = match (row, key) {
        (Some(row), _) => row,
        // Another daemon's request under the same key committed since the
        // look above: nothing was inserted; answer what it made. Nothing
        // was changed before this point but a first approval, which a key
        // never comes with.
        (None, Some(key)) => {
            let row = keyed_query::<Pg>(&new.granted_by, key)
                .build()
                .fetch_one(&mut *conn)
                .await?;
            return repeated(&row, key);
        }
        (None, None) => return Err(StoreError::NotFound),
    };
    let grant = from_row(&row)?;
    events.push(grant_event("grant.created", &grant)?);
    let approved = approve_covered_on(conn, &grant, default_profile, candidates, events).await?;
    Ok(GrantCreated {
        grant,
        approved_first,
        approved,
        repeated: false,
    })
}

/// Narrows the pending actions a grant's queries lock to `candidates`.
fn among(candidates: &Candidates) -> impl FnOnce(&mut QueryBuilder<Pg>) + '_ {
    move |q| {
        if let Candidates::Unseen { covered, seen } = candidates {
            q.push(" AND (id IN (SELECT unnest(")
                .push_bind(covered.clone())
                .push("::text[])) OR id NOT IN (SELECT unnest(")
                .push_bind(seen.clone())
                .push("::text[])))");
        }
    }
}

/// Approves every pending action `grant` covers where the grant would
/// allow it as a new request (the agent's profile judged first); actions
/// past their deadline are left to expire. Only `candidates` are looked
/// at.
async fn approve_covered_on(
    conn: &mut PgConnection,
    grant: &GrantRecord,
    default_profile: Option<&Arc<policy::Profile>>,
    candidates: &Candidates,
    events: &mut Vec<NewEvent>,
) -> Result<Vec<Action>, StoreError> {
    // A grant for a session or a count allows what comes after it only.
    if grant.session.is_some() || grant.uses.is_some() {
        return Ok(Vec::new());
    }
    let pg = to_policy(grant)?;
    let Some(mut q) = covered_query_among::<Pg>(grant.into(), None, among(candidates)) else {
        return Ok(Vec::new());
    };
    q.push(" FOR UPDATE");
    let rows = q.build().fetch_all(&mut *conn).await?;
    let at = now();
    let t = approve_by_grant(&grant.id);
    let mut approved = Vec::new();
    let mut profiles: HashMap<String, Option<Arc<policy::Profile>>> = HashMap::new();
    let mut specs: HashMap<String, Option<String>> = HashMap::new();
    for row in &rows {
        let action = crate::actions::from_row(row)?;
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
        if crate::pg::sessions::held_by_taint_on(conn, &profile, &action).await? {
            continue;
        }
        match transition_on(conn, &action.id, &t).await {
            Ok(action) => {
                if profile.taints_call(
                    &action.action_string,
                    action.scope.as_ref(),
                    action.reads_world(),
                ) {
                    crate::pg::sessions::mark_taint_on(conn, &action).await?;
                }
                events.push(crate::actions::event_for(&action, t.event)?);
                approved.push(action);
            }
            // Its deadline passed meanwhile: it expires instead.
            Err(StoreError::WrongState { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(approved)
}

impl Postgres {
    /// Looks through the pending actions `new` may reach, outside any
    /// transaction (see the module's header).
    pub(crate) async fn pending_covered(&self, new: &NewGrant) -> Result<Candidates, StoreError> {
        let Some(mut look) = Look::new(new)? else {
            return Ok(Candidates::All);
        };
        // Each page on its own snapshot: what the write judges again is
        // exactly what no page held.
        while let Some(mut q) = look.query::<Pg>() {
            let rows = q.build().fetch_all(&self.pool).await?;
            if !look.judge(rows).await? {
                return Ok(Candidates::All);
            }
        }
        Ok(Candidates::Unseen {
            covered: look.covered,
            seen: look.seen,
        })
    }

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
        let candidates = self.pending_covered(&new).await?;
        let mut tx = self.begin().await?;
        let mut events = Vec::new();
        let created = create_on(
            &mut tx,
            new,
            first,
            key.as_ref(),
            self.default_profile.as_ref(),
            &candidates,
            &mut events,
        )
        .await?;
        self.commit(tx, events).await?;
        Ok(created)
    }

    /// Revokes a grant; a second revoke returns the revoked grant unchanged.
    pub async fn revoke_grant(&self, id: &str) -> Result<GrantRecord, StoreError> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(concat!(
            "UPDATE grants SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL RETURNING ",
            grant_columns!()
        ))
        .bind(to_ms(now()))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        match row {
            Some(row) => {
                let grant = from_row(&row)?;
                self.commit(tx, vec![grant_event("grant.revoked", &grant)?])
                    .await?;
                Ok(grant)
            }
            // Revoked before (here or on another node), or no such grant.
            None => get_on(&mut tx, id).await?.ok_or(StoreError::NotFound),
        }
    }

    /// One grant.
    pub async fn get_grant(&self, id: &str) -> Result<GrantRecord, StoreError> {
        let mut conn = self.pool.acquire().await?;
        get_on(&mut conn, id).await?.ok_or(StoreError::NotFound)
    }

    /// Grants, newest first.
    pub async fn list_grants(&self, f: &GrantFilter) -> Result<Vec<GrantRecord>, StoreError> {
        let rows = list_query::<Pg>(f).build().fetch_all(&self.pool).await?;
        rows.iter().map(from_row).collect()
    }

    /// Whether the grant cache may answer now: only while the tail follows
    /// the log (see [`Postgres::active_grants`]); it is cleared when a new
    /// second begins, so nothing in it is older than a second.
    pub(crate) fn grant_cache_usable(&self) -> bool {
        let second = to_ms(now()) / 1000;
        if self
            .grants_second
            .swap(second, std::sync::atomic::Ordering::Relaxed)
            != second
        {
            self.grants.clear();
        }
        self.tail_follows()
    }

    /// Active grants that may apply to `agent` acting on `tool` (a tool
    /// name or a handler id), as the policy crate sees them.
    ///
    /// Cached while the tail follows the log (it listens, and reads
    /// without failing): until it publishes a grant event (this node's
    /// before their callers are answered, another node's as soon as its
    /// notification is read) and for at most a second. A grant made on
    /// another node therefore counts here within a notification's
    /// latency, as a decision made there wakes waiters here; an action
    /// that asks for want of a grant made meanwhile is approved by it when
    /// stored ([`approve_if_granted`]); and one a grant revoked meanwhile
    /// allowed asks when stored ([`lapsed_on`]).
    pub async fn active_grants(
        &self,
        agent: &str,
        tool: &str,
    ) -> Result<Vec<policy::Grant>, StoreError> {
        let following = self.grant_cache_usable();
        let generation = match self.grants.get(agent, tool) {
            Ok(grants) if following => return Ok(grants.as_ref().clone()),
            Ok(_) => None,
            Err(generation) => Some(generation),
        };
        let rows = sqlx::query(concat!(
            "SELECT ",
            grant_columns!(),
            " FROM grants WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1) \
             AND (agent IS NULL OR agent = $2) AND (handler = $3 OR tool = $3) \
             AND session IS NULL AND uses_left IS NULL"
        ))
        .bind(to_ms(now()))
        .bind(agent)
        .bind(tool)
        .fetch_all(&self.pool)
        .await?;
        let grants = rows
            .iter()
            .map(|r| from_row(r).and_then(|g| self.grants.to_policy(&g)))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(generation) = generation.filter(|_| following) {
            self.grants
                .insert(generation, agent, tool, Arc::new(grants.clone()));
        }
        Ok(grants)
    }
}
