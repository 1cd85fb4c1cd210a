//! Action rows: insertion with idempotency, compare-and-set transitions,
//! listing, and expiry at the deadline.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sqlx::{QueryBuilder, Sqlite, SqliteConnection};

use crate::SqliteStore;
use crate::create::CreateJob;
use crate::error::StoreError;
use crate::events::{self, NewEvent};
use crate::time::{from_ms, now, opt_from_ms, to_ms};
use actiongate_api::model::{Action, ActionStatus, Decision, DecisionResult, Event, Json, Outcome};

/// An action about to be stored, already decided by the policy.
#[derive(Debug, Clone)]
pub struct NewAction {
    /// Time-ordered id.
    pub id: String,
    /// The requesting agent.
    pub agent: String,
    /// Tool (or handler id).
    pub tool: String,
    /// Detail.
    pub detail: String,
    /// `tool:<tool>:<detail>`.
    pub action_string: String,
    /// Why the agent wants it.
    pub reason: Option<String>,
    /// The policy's answer; it sets the initial status.
    pub decision: Decision,
    /// When a pending action expires (only for `ask`).
    pub deadline: Option<DateTime<Utc>>,
    /// Client-chosen key that makes retries safe.
    pub idempotency_key: Option<String>,
    /// Hash of the request body, to tell a retry from a different request
    /// reusing the key (empty without a key: it is not stored then).
    pub request_hash: String,
    /// What a handler action runs; `None` for decision-only actions.
    pub handler: Option<HandlerAction>,
    /// A decision-only action's params: the tool call's input as its
    /// runtime sent it, shown to the humans who decide (stored as the
    /// params shown; nothing runs them). `None` for a handler action,
    /// whose params are its [`HandlerAction`]'s.
    pub params: Option<Value>,
    /// The session it belongs to, as the agent runtime names it.
    pub session: Option<String>,
    /// The runtime that sent it (`claude-code`, `cursor`, …).
    pub runtime: Option<String>,
    /// A grant with a count of uses whose use this action takes, in the
    /// transaction that stores it; when none is left the action is stored
    /// asked instead.
    pub take_use: Option<String>,
    /// The grants that allowed it, read from a cache. The transaction that
    /// stores the action checks each is still in force (revoked a moment
    /// ago by an operator, a session's end, or on Postgres another
    /// daemon), and stores it asked if one is not.
    pub relies_on: Vec<String>,
}

impl NewAction {
    /// A decision-only action of `agent` on `tool` with `detail`: a new
    /// time-ordered id, its action string, and nothing else set (no reason,
    /// deadline, idempotency key or handler).
    pub fn new(agent: String, tool: String, detail: String, decision: Decision) -> NewAction {
        NewAction {
            id: uuid::Uuid::now_v7().to_string(),
            action_string: actiongate_policy::format_action(&tool, &detail),
            agent,
            tool,
            detail,
            reason: None,
            decision,
            deadline: None,
            idempotency_key: None,
            request_hash: String::new(),
            handler: None,
            params: None,
            session: None,
            runtime: None,
            take_use: None,
            relies_on: Vec::new(),
        }
    }
}

/// The handler part of a handler action.
#[derive(Debug, Clone)]
pub struct HandlerAction {
    /// Handler id.
    pub handler: String,
    /// Action name.
    pub action: String,
    /// Params as sent (only the executor sees them).
    pub params: Value,
    /// Params as shown, sensitive values masked.
    pub params_view: Value,
    /// Permission it needs.
    pub permission: String,
    /// Scope values extracted from the params.
    pub scope: Map<String, Value>,
    /// Rendered display.
    pub display: Option<Value>,
    /// The handler's hints for this action.
    pub hints: Option<actiongate_api::handlers::ActionHints>,
    /// When set and the policy allowed the action, it is stored already
    /// claimed for its first attempt (`running`, leased until then), so the
    /// caller can hand it to the dispatcher without another transaction.
    pub claim_until: Option<DateTime<Utc>>,
}

/// A compare-and-set change of an action's status.
#[derive(Debug, Clone)]
pub struct Transition {
    /// The statuses it may start from.
    pub from: &'static [ActionStatus],
    /// The status it ends in.
    pub to: ActionStatus,
    /// Who decided, when this is a decision (sets `decided_at`).
    pub decided_by: Option<String>,
    /// The human's note or reason.
    pub note: Option<String>,
    /// The outcome, when this reports one.
    pub outcome: Option<Outcome>,
    /// The event type recording it.
    pub event: &'static str,
}

/// Filters of an action listing; `cursor` is the last id of the previous page.
#[derive(Debug, Clone, Default)]
pub struct ActionFilter {
    /// Only this status.
    pub status: Option<ActionStatus>,
    /// Only this agent's.
    pub agent: Option<String>,
    /// Only this tool's.
    pub tool: Option<String>,
    /// Only this session's.
    pub session: Option<String>,
    /// Page after this id (newest first, or oldest first with `oldest_first`).
    pub cursor: Option<String>,
    /// Page size.
    pub limit: i64,
    /// Oldest first (the longest waiting first) instead of newest first.
    pub oldest_first: bool,
}

macro_rules! action_columns {
    () => {
        "id, agent, tool, detail, action_string, reason, status, decision_result, \
    decision_reason, decision_rule, created_at, decided_at, decided_by, deadline, outcome, decision_note, \
    handler, action_name, params_view, permission, scope, display, hints, attempt_log, session, runtime, team"
    };
}
pub(crate) use action_columns;

pub(crate) fn from_row(row: &impl crate::row::Cols) -> Result<Action, StoreError> {
    let status: String = row.try_get("status")?;
    let result: String = row.try_get("decision_result")?;
    let rule: Option<String> = row.try_get("decision_rule")?;
    let outcome: Option<String> = row.try_get("outcome")?;
    let mut action = Action {
        id: row.try_get("id")?,
        agent: row.try_get("agent")?,
        tool: row.try_get("tool")?,
        detail: row.try_get("detail")?,
        action_string: row.try_get("action_string")?,
        reason: row.try_get("reason")?,
        status: status.parse().map_err(StoreError::Corrupt)?,
        decision: Decision {
            result: result
                .parse::<DecisionResult>()
                .map_err(StoreError::Corrupt)?,
            reason: row.try_get("decision_reason")?,
            rule: rule
                .map(|r| serde_json::from_str::<Value>(&r))
                .transpose()?,
        },
        created_at: from_ms(row.try_get("created_at")?),
        decided_at: opt_from_ms(row.try_get("decided_at")?),
        decided_by: row.try_get("decided_by")?,
        deadline: opt_from_ms(row.try_get("deadline")?),
        outcome: outcome.map(|o| serde_json::from_str(&o)).transpose()?,
        decision_note: row.try_get("decision_note")?,
        handler: row.try_get("handler")?,
        action: row.try_get("action_name")?,
        params: json_col(row, "params_view")?,
        permission: row.try_get("permission")?,
        scope: json_col(row, "scope")?,
        display: json_col(row, "display")?,
        hints: json_col(row, "hints")?,
        attempts: json_col(row, "attempt_log")?.unwrap_or_default(),
        session: row.try_get("session")?,
        runtime: row.try_get("runtime")?,
        team: json_col(row, "team")?.unwrap_or_default(),
        findings: Vec::new(),
    };
    crate::action_views::derive(&mut action);
    Ok(action)
}

fn json_col<T: serde::de::DeserializeOwned>(
    row: &impl crate::row::Cols,
    col: &str,
) -> Result<Option<T>, StoreError> {
    let text: Option<String> = row.try_get(col)?;
    Ok(text.map(|t| serde_json::from_str(&t)).transpose()?)
}

/// A handler's hints as stored (`NULL` when it declared none).
pub(crate) fn hints_json(hints: Option<&actiongate_api::handlers::ActionHints>) -> Option<String> {
    hints.and_then(|h| serde_json::to_string(h).ok())
}

pub(crate) fn event_for(action: &Action, kind: &'static str) -> Result<NewEvent, StoreError> {
    Ok(NewEvent {
        kind,
        agent: Some(action.agent.clone()),
        action_id: Some(action.id.clone()),
        grant_id: None,
        data: Json::of(action)?,
    })
}

pub(crate) async fn get_on(
    conn: &mut SqliteConnection,
    id: &str,
) -> Result<Option<Action>, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT ",
        action_columns!(),
        " FROM actions WHERE id = ?"
    ))
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// The query [`Store::list_actions`] runs, after `prefix` (`EXPLAIN QUERY
/// PLAN ` in a test).
fn list_query(prefix: &str, f: &ActionFilter) -> QueryBuilder<Sqlite> {
    let mut q: QueryBuilder<Sqlite> = QueryBuilder::new(prefix);
    q.push(concat!(
        "SELECT ",
        action_columns!(),
        " FROM actions WHERE 1 = 1"
    ));
    if let Some(st) = f.status {
        q.push(" AND status = ").push_bind(st.as_str());
        if st != ActionStatus::Approved {
            // `actions_status` leaves approved actions out (migration 6);
            // SQLite uses it only when the query says so itself.
            q.push(" AND status <> 'approved'");
        }
    }
    filter_and_page(&mut q, f);
    q
}

/// The filters of `f` past its status, its cursor, order and page size, on
/// either backend's listing.
pub(crate) fn filter_and_page<DB>(q: &mut QueryBuilder<DB>, f: &ActionFilter)
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    for (column, value) in [
        (" AND agent = ", &f.agent),
        (" AND tool = ", &f.tool),
        (" AND session = ", &f.session),
    ] {
        if let Some(v) = value {
            q.push(column).push_bind(v.clone());
        }
    }
    crate::paging::by_id(q, f.cursor.as_deref(), f.limit, f.oldest_first);
}

/// The action `new` is once stored at `created`, in its initial state.
pub(crate) fn stored_action(new: NewAction, created: DateTime<Utc>) -> Action {
    let (status, decided, deadline) = initial_state(&new);
    let decided_by = decided.then(|| crate::create::decided_at_creation(&new.decision));
    let h = new.handler;
    let mut action = Action {
        id: new.id,
        agent: new.agent,
        tool: new.tool,
        detail: new.detail,
        action_string: new.action_string,
        reason: new.reason,
        status,
        decision: new.decision,
        created_at: created,
        decided_at: decided.then_some(created),
        decided_by,
        deadline,
        outcome: None,
        decision_note: None,
        params: match &h {
            Some(h) => Some(h.params_view.clone()),
            None => new.params,
        },
        handler: h.as_ref().map(|h| h.handler.clone()),
        action: h.as_ref().map(|h| h.action.clone()),
        permission: h.as_ref().map(|h| h.permission.clone()),
        display: h.as_ref().and_then(|h| h.display.clone()),
        hints: h.as_ref().and_then(|h| h.hints.clone()),
        scope: h.map(|h| h.scope),
        attempts: Vec::new(),
        session: new.session,
        runtime: new.runtime,
        team: Default::default(),
        findings: Vec::new(),
    };
    crate::action_views::derive(&mut action);
    action
}

/// The status a new action starts in, whether the policy settled it, and
/// its deadline (only while pending, truncated to the stored precision so
/// the answer equals what is read back).
pub(crate) fn initial_state(new: &NewAction) -> (ActionStatus, bool, Option<DateTime<Utc>>) {
    let (status, decided) = match new.decision.result {
        DecisionResult::Allow => (ActionStatus::Approved, true),
        DecisionResult::Deny => (ActionStatus::Denied, true),
        DecisionResult::Ask => (ActionStatus::Pending, false),
    };
    let deadline = new
        .deadline
        .filter(|_| status == ActionStatus::Pending)
        .map(|d| from_ms(to_ms(d)));
    (status, decided, deadline)
}

/// The type of the event that records a new action in `status`.
pub(crate) fn created_kind(status: ActionStatus) -> &'static str {
    match status {
        ActionStatus::Approved => "action.approved",
        ActionStatus::Denied => "action.denied",
        _ => "action.enqueued",
    }
}

pub(crate) async fn insert_on(
    conn: &mut SqliteConnection,
    new: NewAction,
) -> Result<(Action, bool), StoreError> {
    if let Some(key) = &new.idempotency_key {
        let existing: Option<(String, Option<String>)> = sqlx::query_as(
            "SELECT id, request_hash FROM actions WHERE agent = ? AND idempotency_key = ?",
        )
        .bind(&new.agent)
        .bind(key)
        .fetch_optional(&mut *conn)
        .await?;
        if let Some((id, hash)) = existing {
            if hash.as_deref() != Some(new.request_hash.as_str()) {
                return Err(StoreError::Conflict(format!(
                    "idempotency key '{key}' was already used for a different request"
                )));
            }
            let action = get_on(conn, &id).await?.ok_or(StoreError::NotFound)?;
            return Ok((action, false));
        }
    }
    let created = now();
    let (status, decided, deadline) = initial_state(&new);
    let rule = new.decision.rule.as_ref().map(Value::to_string);
    let claim = claim_of(&new);
    let h = new.handler.as_ref();
    sqlx::query(
        "INSERT INTO actions (id, agent, tool, detail, action_string, reason, status, decision_result, \
         decision_reason, decision_rule, created_at, decided_at, decided_by, deadline, settled_at, \
         idempotency_key, request_hash, handler, action_name, params, params_view, permission, scope, display, \
         hints, attempts, lease_until, session, runtime) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&new.id)
    .bind(&new.agent)
    .bind(&new.tool)
    .bind(&new.detail)
    .bind(&new.action_string)
    .bind(&new.reason)
    .bind(if claim.is_some() {
        ActionStatus::Running.as_str()
    } else {
        status.as_str()
    })
    .bind(new.decision.result.as_str())
    .bind(&new.decision.reason)
    .bind(rule)
    .bind(to_ms(created))
    .bind(decided.then(|| to_ms(created)))
    .bind(decided.then(|| crate::create::decided_at_creation(&new.decision)))
    .bind(deadline.map(to_ms))
    .bind(decided.then(|| to_ms(created)))
    .bind(&new.idempotency_key)
    .bind(&new.request_hash)
    .bind(h.map(|h| h.handler.clone()))
    .bind(h.map(|h| h.action.clone()))
    .bind(h.map(|h| h.params.to_string()))
    .bind(match h {
        Some(h) => Some(h.params_view.to_string()),
        None => new.params.as_ref().map(Value::to_string),
    })
    .bind(h.map(|h| h.permission.clone()))
    .bind(h.map(|h| Value::Object(h.scope.clone()).to_string()))
    .bind(h.and_then(|h| h.display.as_ref().map(Value::to_string)))
    .bind(h.and_then(|h| hints_json(h.hints.as_ref())))
    .bind(i64::from(claim.is_some()))
    .bind(claim.map(to_ms))
    .bind(&new.session)
    .bind(&new.runtime)
    .execute(&mut *conn)
    .await?;
    let mut action = stored_action(new, created);
    for ev in created_events(&mut action, claim.is_some())? {
        events::insert_on(conn, &ev).await?;
    }
    Ok((action, true))
}

/// Until when a new action is stored claimed for its first attempt: only an
/// allowed handler action whose caller reserved a dispatch slot.
pub(crate) fn claim_of(new: &NewAction) -> Option<DateTime<Utc>> {
    new.handler
        .as_ref()
        .and_then(|h| h.claim_until)
        .filter(|_| new.decision.result == DecisionResult::Allow)
}

/// The events recording a new action, in order: how the policy left it
/// (approved, denied or enqueued); `action.started` when it is stored
/// `claimed` (the same two events a later claim records), which moves
/// `action` to `running`; and for a pending handler action
/// `permission.needed`, which tells operators which grant would let it (and
/// similar ones) run.
pub(crate) fn created_events(
    action: &mut Action,
    claimed: bool,
) -> Result<Vec<NewEvent>, StoreError> {
    let mut out = vec![event_for(action, created_kind(action.status))?];
    if claimed {
        action.status = ActionStatus::Running;
        out.push(event_for(action, "action.started")?);
    }
    if action.status == ActionStatus::Pending
        && let (Some(handler), Some(permission), Some(scope)) =
            (&action.handler, &action.permission, &action.scope)
    {
        out.push(NewEvent {
            kind: "permission.needed",
            agent: Some(action.agent.clone()),
            action_id: Some(action.id.clone()),
            grant_id: None,
            data: Json::of(&serde_json::json!({
                "action_id": action.id,
                "agent": action.agent,
                "handler": handler,
                "permission": permission,
                "scope": scope,
                "display": action.display,
            }))?,
        });
    }
    Ok(out)
}

pub(crate) async fn transition_on(
    conn: &mut SqliteConnection,
    id: &str,
    t: &Transition,
) -> Result<Action, StoreError> {
    let at = to_ms(now());
    let outcome = t.outcome.as_ref().map(serde_json::to_string).transpose()?;
    let mut q: QueryBuilder<Sqlite> = QueryBuilder::new("UPDATE actions SET status = ");
    q.push_bind(t.to.as_str());
    if let Some(by) = &t.decided_by {
        q.push(", decided_at = ").push_bind(at);
        q.push(", decided_by = ").push_bind(by.clone());
    }
    if let Some(note) = &t.note {
        q.push(", decision_note = ").push_bind(note.clone());
    }
    if let Some(outcome) = outcome {
        q.push(", outcome = ").push_bind(outcome);
    }
    q.push(", settled_at = ").push_bind(at);
    q.push(" WHERE id = ").push_bind(id.to_owned());
    q.push(" AND status IN (");
    let mut sep = q.separated(", ");
    for st in t.from {
        sep.push_bind(st.as_str());
    }
    q.push(")");
    // Past its deadline a pending action is expired, whether or not the
    // sweeper has written that yet: nobody decides it any more.
    q.push(" AND (status <> 'pending' OR deadline IS NULL OR deadline > ")
        .push_bind(at)
        .push(")");
    q.push(concat!(" RETURNING ", action_columns!()));
    let row = q.build().fetch_optional(&mut *conn).await?;
    match row {
        Some(row) => {
            let action = from_row(&row)?;
            events::insert_on(conn, &event_for(&action, t.event)?).await?;
            Ok(action)
        }
        None => match get_on(conn, id).await? {
            Some(current) => Err(StoreError::WrongState {
                current: if current.status == ActionStatus::Pending
                    && current.deadline.is_some_and(|d| to_ms(d) <= at)
                {
                    // The sweeper, due now, writes the expiry.
                    ActionStatus::Expired.to_string()
                } else {
                    current.status.to_string()
                },
            }),
            None => Err(StoreError::NotFound),
        },
    }
}

/// What [`Store::create_action`] stored.
#[derive(Debug)]
pub struct Inserted {
    /// The action.
    pub action: Action,
    /// `false`: an earlier action with the same idempotency key.
    pub created: bool,
    /// The event whose data is `action` as stored, when it was just created.
    rendered: Option<Arc<Event>>,
}

impl Inserted {
    /// What a backend stored: `action`, whether it is new, and its event.
    pub(crate) fn new(action: Action, created: bool, rendered: Option<Arc<Event>>) -> Inserted {
        Inserted {
            action,
            created,
            rendered,
        }
    }

    /// `action` as JSON, as its event records it (rendered once, when it
    /// was stored), if at hand.
    pub fn rendered(&self) -> Option<&str> {
        self.rendered.as_ref().map(|ev| ev.data.get())
    }
}

impl SqliteStore {
    /// Stores a decided action and the event recording it. With an
    /// idempotency key already used by this agent: the same request returns
    /// the existing action (`false`: nothing new stored), a different one is
    /// a [`StoreError::Conflict`].
    pub async fn insert_action(&self, new: NewAction) -> Result<(Action, bool), StoreError> {
        let done = self.create_action(new).await?;
        Ok((done.action, done.created))
    }

    /// [`Store::insert_action`], answering also with the new action already
    /// rendered as JSON when it was just created.
    pub async fn create_action(&self, new: NewAction) -> Result<Inserted, StoreError> {
        if new.take_use.is_some() || crate::sessions::relies_on_grants(&new) {
            let (action, created) = if new.take_use.is_some() {
                self.create_taking_use(new).await?
            } else {
                self.create_relying_on_grants(new).await?
            };
            return Ok(Inserted {
                action,
                created,
                rendered: None,
            });
        }
        // One that asks is looked at again for a grant made meanwhile
        // (`late_grant`): it does not take the batched path.
        if CreateJob::applies(&new) && new.decision.result != DecisionResult::Ask {
            let (action, rendered) = self.writer.create(new).await?;
            return Ok(Inserted {
                action,
                created: true,
                rendered,
            });
        }
        let profile = self.default_profile.clone();
        let (action, created) = self
            .writer
            .run_sparing_grants(move |conn| {
                Box::pin(crate::late_grant::insert_on(conn, new, profile))
            })
            .await?;
        Ok(Inserted {
            action,
            created,
            rendered: None,
        })
    }

    /// Moves an action from one of `t.from` to `t.to` if it is still in one
    /// of them; otherwise [`StoreError::WrongState`] with where it is now.
    pub async fn transition(&self, id: &str, t: Transition) -> Result<Action, StoreError> {
        let id = id.to_owned();
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move { transition_on(conn, &id, &t).await })
            })
            .await
    }

    /// Expires every pending action whose deadline is at or before `at`.
    pub async fn expire_due(&self, at: DateTime<Utc>) -> Result<Vec<Action>, StoreError> {
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let rows = sqlx::query(concat!("UPDATE actions SET status = 'expired', decided_at = ?1, decided_by = 'deadline', \
                         settled_at = ?1 WHERE status = 'pending' AND deadline <= ?1 RETURNING ", action_columns!()))
                    .bind(to_ms(at))
                    .fetch_all(&mut *conn)
                    .await?;
                    let mut expired = Vec::with_capacity(rows.len());
                    for row in &rows {
                        let action = from_row(row)?;
                        events::insert_on(conn, &event_for(&action, "action.expired")?).await?;
                        expired.push(action);
                    }
                    Ok(expired)
                })
            })
            .await
    }

    /// The earliest deadline among pending actions.
    pub async fn next_deadline(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let ms: Option<i64> =
            sqlx::query_scalar("SELECT MIN(deadline) FROM actions WHERE status = 'pending'")
                .fetch_one(&self.read)
                .await?;
        Ok(ms.map(from_ms))
    }

    /// One action by id.
    pub async fn get_action(&self, id: &str) -> Result<Action, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            action_columns!(),
            " FROM actions WHERE id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.read)
        .await?;
        row.as_ref()
            .map(from_row)
            .transpose()?
            .ok_or(StoreError::NotFound)
    }

    /// The action `agent` stored under idempotency key `key`, if any.
    pub async fn action_for_key(
        &self,
        agent: &str,
        key: &str,
    ) -> Result<Option<Action>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            action_columns!(),
            " FROM actions WHERE agent = ? AND idempotency_key = ?"
        ))
        .bind(agent)
        .bind(key)
        .fetch_optional(&self.read)
        .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// A page of actions, newest first.
    pub async fn list_actions(&self, f: &ActionFilter) -> Result<Vec<Action>, StoreError> {
        let rows = list_query("", f).build().fetch_all(&self.read).await?;
        rows.iter().map(from_row).collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{SqliteStore, StoreOptions};

    fn new_action(n: usize, result: DecisionResult) -> NewAction {
        crate::test_support::new_action(n, format!("agent-{}", n % 2), result)
    }

    /// Approved actions are listed from the table, every other status from
    /// `actions_status`, which leaves approved actions out: each listing
    /// still finds exactly its actions, newest first.
    #[tokio::test]
    async fn each_status_lists_exactly_its_actions_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("t.db"), StoreOptions::default())
            .await
            .unwrap();
        let cancel = Transition {
            from: &[ActionStatus::Pending],
            to: ActionStatus::Cancelled,
            decided_by: None,
            note: None,
            outcome: None,
            event: "action.cancelled",
        };
        let mut expected: Vec<(ActionStatus, String)> = Vec::new();
        for n in 0..24 {
            let result = [
                DecisionResult::Allow,
                DecisionResult::Ask,
                DecisionResult::Deny,
            ][n % 3];
            let (a, _) = store.insert_action(new_action(n, result)).await.unwrap();
            let a = if n % 6 == 1 {
                store.transition(&a.id, cancel.clone()).await.unwrap()
            } else {
                a
            };
            expected.push((a.status, a.id));
        }
        expected.reverse();
        for status in [
            ActionStatus::Approved,
            ActionStatus::Pending,
            ActionStatus::Denied,
            ActionStatus::Cancelled,
            ActionStatus::Completed,
        ] {
            let mut f = ActionFilter {
                session: None,
                status: Some(status),
                agent: None,
                tool: None,
                cursor: None,
                limit: 3,
                oldest_first: false,
            };
            let mut listed = Vec::new();
            loop {
                let page = store.list_actions(&f).await.unwrap();
                let Some(last) = page.last() else { break };
                f.cursor = Some(last.id.clone());
                listed.extend(page.into_iter().map(|a| a.id));
            }
            let want: Vec<String> = expected
                .iter()
                .filter(|(s, _)| *s == status)
                .map(|(_, id)| id.clone())
                .collect();
            assert_eq!(listed, want, "{status:?}");

            f.cursor = None;
            let plan: Vec<(i64, i64, i64, String)> = list_query("EXPLAIN QUERY PLAN ", &f)
                .build_query_as()
                .fetch_all(&store.read)
                .await
                .unwrap();
            let indexed = plan.iter().any(|p| p.3.contains("actions_status"));
            assert_eq!(
                indexed,
                status != ActionStatus::Approved,
                "{status:?}: {plan:?}"
            );
            // Oldest first reads the same index the other way, sorting nothing.
            f.oldest_first = true;
            let plan: Vec<(i64, i64, i64, String)> = list_query("EXPLAIN QUERY PLAN ", &f)
                .build_query_as()
                .fetch_all(&store.read)
                .await
                .unwrap();
            let sorted = plan.iter().any(|p| p.3.contains("TEMP B-TREE"));
            assert!(!sorted, "{status:?}: {plan:?}");
        }
        store.close().await;
    }
}
