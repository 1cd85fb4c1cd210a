//! New actions on Postgres: the row of a decided action and its events,
//! in one statement when nothing must be read first (no idempotency key,
//! no grant to look for), else in a transaction that inserts first and
//! reads only what the insert leaves open (the action holding the key, a
//! grant made since the decision).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;

use crate::actions::{
    Inserted, NewAction, action_columns, claim_of, created_events, from_row, stored_action,
};
use crate::error::StoreError;
use crate::pg::{Postgres, grants};
use crate::time::{now, to_ms};
use actiongate_api::model::{Action, DecisionResult};

/// The action `agent` stored under idempotency key `key`: a request with
/// the same `hash` gets it back, a different one is a conflict.
async fn existing(
    conn: &mut PgConnection,
    agent: &str,
    key: &str,
    hash: &str,
) -> Result<Option<Action>, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT request_hash, ",
        action_columns!(),
        " FROM actions WHERE agent = $1 AND idempotency_key = $2"
    ))
    .bind(agent)
    .bind(key)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let stored: Option<String> = crate::row::Cols::try_get(&row, "request_hash")?;
    if stored.as_deref() != Some(hash) {
        return Err(StoreError::Conflict(format!(
            "idempotency key '{key}' was already used for a different request"
        )));
    }
    from_row(&row).map(Some)
}

/// The columns of a new action row, in the order [`insert_sql`] and
/// [`bind_row`] list them.
macro_rules! insert_columns {
    () => {
        "id, agent, tool, detail, action_string, reason, status, decision_result, \
         decision_reason, decision_rule, created_at, decided_at, decided_by, deadline, settled_at, \
         idempotency_key, request_hash, handler, action_name, params, params_view, permission, \
         scope, display, attempts, lease_until, session, runtime, hints"
    };
}

/// `INSERT` of a new action row with its values as parameters `$n` to
/// `$n+26` (`settled_at` is `decided_at`), skipping a row whose idempotency
/// key the agent used before.
macro_rules! insert_sql {
    ($a:literal, $b:literal, $c:literal, $d:literal, $e:literal, $f:literal, $g:literal,
     $h:literal, $i:literal, $j:literal, $k:literal, $l:literal, $m:literal, $n:literal,
     $o:literal, $p:literal, $q:literal, $r:literal, $s:literal, $t:literal, $u:literal,
     $v:literal, $w:literal, $x:literal, $y:literal, $z:literal, $zz:literal, $zzz:literal) => {
        concat!(
            "INSERT INTO actions (",
            insert_columns!(),
            ") VALUES (",
            $a,
            ", ",
            $b,
            ", ",
            $c,
            ", ",
            $d,
            ", ",
            $e,
            ", ",
            $f,
            ", ",
            $g,
            ", ",
            $h,
            ", ",
            $i,
            ", ",
            $j,
            ", ",
            $k,
            ", ",
            $l,
            ", ",
            $m,
            ", ",
            $n,
            ", ",
            $l,
            ", ",
            $o,
            ", ",
            $p,
            ", ",
            $q,
            ", ",
            $r,
            ", ",
            $s,
            ", ",
            $t,
            ", ",
            $u,
            ", ",
            $v,
            ", ",
            $w,
            ", ",
            $x,
            ", ",
            $y,
            ", ",
            $z,
            ", ",
            $zz,
            ", ",
            $zzz,
            ") ON CONFLICT (agent, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING"
        )
    };
}

/// What a new action's row holds besides the action as answered, in
/// [`insert_columns`] order (without the repeated `settled_at`).
struct Row<'a> {
    a: &'a Action,
    rule: Option<String>,
    key: Option<&'a str>,
    hash: &'a str,
    /// The params as sent (the action shows them masked).
    params: Option<&'a str>,
    params_view: Option<String>,
    scope: Option<String>,
    display: Option<String>,
    hints: Option<String>,
    claim: Option<i64>,
}

/// A new action as stored and answered (`running` when it is stored
/// claimed), the events recording it, and what else its row holds.
struct New {
    action: Action,
    events: Vec<crate::events::NewEvent>,
    key: Option<String>,
    hash: String,
    params: Option<String>,
    claim: Option<i64>,
}

impl New {
    fn of(mut new: NewAction, created: DateTime<Utc>) -> Result<New, StoreError> {
        let claim = claim_of(&new).map(to_ms);
        let params = new.handler.as_ref().map(|h| h.params.to_string());
        let key = new.idempotency_key.take();
        let hash = std::mem::take(&mut new.request_hash);
        let mut action = stored_action(new, created);
        let events = created_events(&mut action, claim.is_some())?;
        Ok(New {
            action,
            events,
            key,
            hash,
            params,
            claim,
        })
    }

    /// Its row, once its events are taken.
    fn row(&self) -> Row<'_> {
        row(
            &self.action,
            self.key.as_deref(),
            &self.hash,
            self.params.as_deref(),
            self.claim,
        )
    }
}

/// The row of `a`, with what the action does not show.
fn row<'a>(
    a: &'a Action,
    key: Option<&'a str>,
    hash: &'a str,
    params: Option<&'a str>,
    claim: Option<i64>,
) -> Row<'a> {
    Row {
        a,
        rule: a.decision.rule.as_ref().map(Value::to_string),
        key,
        hash,
        params,
        params_view: a.params.as_ref().map(Value::to_string),
        scope: a
            .scope
            .as_ref()
            .map(|s| Value::Object(s.clone()).to_string()),
        display: a.display.as_ref().map(Value::to_string),
        hints: crate::actions::hints_json(a.hints.as_ref()),
        claim,
    }
}

/// Binds the 28 values of `$r` (a [`Row`]) to `$q`, in [`insert_columns`]
/// order.
macro_rules! bind_row {
    ($q:expr, $r:expr) => {{
        let r: &Row<'_> = $r;
        let a = r.a;
        $q.bind(&a.id)
            .bind(&a.agent)
            .bind(&a.tool)
            .bind(&a.detail)
            .bind(&a.action_string)
            .bind(&a.reason)
            .bind(a.status.as_str())
            .bind(a.decision.result.as_str())
            .bind(&a.decision.reason)
            .bind(r.rule.as_deref())
            .bind(to_ms(a.created_at))
            .bind(a.decided_at.map(to_ms))
            .bind(a.decided_by.as_deref())
            .bind(a.deadline.map(to_ms))
            .bind(r.key)
            .bind(r.hash)
            .bind(a.handler.as_deref())
            .bind(a.action.as_deref())
            .bind(r.params)
            .bind(r.params_view.as_deref())
            .bind(a.permission.as_deref())
            .bind(r.scope.as_deref())
            .bind(r.display.as_deref())
            .bind(i64::from(r.claim.is_some()))
            .bind(r.claim)
            .bind(a.session.as_deref())
            .bind(a.runtime.as_deref())
            .bind(r.hints.as_deref())
    }};
}

impl Postgres {
    /// Stores a decided action and the events recording it; with an
    /// idempotency key already used by this agent, the same request returns
    /// the existing action (`false`), a different one is a conflict.
    pub async fn insert_action(&self, new: NewAction) -> Result<(Action, bool), StoreError> {
        let done = self.create_action(new).await?;
        Ok((done.action, done.created))
    }

    /// [`Postgres::insert_action`], answering with the new action's event.
    pub async fn create_action(&self, mut new: NewAction) -> Result<Inserted, StoreError> {
        let counted = new.take_use.is_some();
        if counted || !new.relies_on.is_empty() {
            // The use is taken, and the grants that allowed it are read, in
            // the transaction that stores the action (a retry of a stored
            // request rolls it back: the insert does nothing and the
            // transaction is dropped).
            let mut tx = self.begin().await?;
            let lapsed = grants::lapsed_on(&mut tx, &mut new).await?;
            if counted || lapsed {
                grants::lock_grants(&mut tx, false).await?;
            }
            crate::pg::sessions::take_use_on(&mut tx, &mut new).await?;
            let asks = new.decision.result == DecisionResult::Ask;
            let new = New::of(new, now())?;
            let done = self.create_in_transaction(tx, new, asks).await;
            // The count this node cached is one lower now (or, cut off,
            // may be); a grant it cached has lapsed.
            if counted || lapsed {
                self.grants.clear();
            }
            return done;
        }
        let asks = new.decision.result == DecisionResult::Ask;
        let new = New::of(new, now())?;
        if asks || new.key.is_some() {
            let mut tx = self.begin().await?;
            // Decided on grants read before this transaction: one made since
            // (on any node) is looked for below, under the lock that orders
            // the two (see `pg::grants`).
            if asks {
                grants::lock_grants(&mut tx, false).await?;
            }
            self.create_in_transaction(tx, new, asks).await
        } else {
            self.create_at_once(new).await
        }
    }

    /// A new action that may have to read first, in `tx`: the action
    /// holding its idempotency key, or (`asks`) a grant made since it was
    /// decided.
    async fn create_in_transaction(
        &self,
        mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
        new: New,
        asks: bool,
    ) -> Result<Inserted, StoreError> {
        // Inserted first: a key used before (or by a concurrent request on
        // any node, once it commits) makes it do nothing, and the action
        // holding the key is the answer.
        let row = new.row();
        let inserted = bind_row!(
            sqlx::query(insert_sql!(
                "$1", "$2", "$3", "$4", "$5", "$6", "$7", "$8", "$9", "$10", "$11", "$12", "$13",
                "$14", "$15", "$16", "$17", "$18", "$19", "$20", "$21", "$22", "$23", "$24", "$25",
                "$26", "$27", "$28"
            )),
            &row
        )
        .execute(&mut *tx)
        .await?;
        drop(row);
        if inserted.rows_affected() == 0 {
            let a = &new.action;
            let key = new.key.as_deref().unwrap_or_default();
            let action = existing(&mut tx, &a.agent, key, &new.hash)
                .await?
                .ok_or(StoreError::NotFound)?;
            return Ok(Inserted::new(action, false, None));
        }
        let New {
            mut action,
            mut events,
            ..
        } = new;
        if asks
            && let Some((approved, event)) =
                grants::approve_if_granted(&mut tx, &action, self.default_profile.as_ref()).await?
        {
            action = approved;
            events.push(event);
        }
        let written = self.commit(tx, events).await?;
        Ok(Inserted::new(action, true, rendered(written)))
    }

    /// A new action that needs nothing read first (no idempotency key to
    /// look up, no grant to look for): its row, its events queued
    /// in one statement, its own transaction, one round trip.
    async fn create_at_once(&self, new: New) -> Result<Inserted, StoreError> {
        let New {
            action,
            events,
            key,
            hash,
            params,
            claim,
        } = new;
        let batch = crate::pg::log::Batch::new(events);
        let row = row(&action, key.as_deref(), &hash, params.as_deref(), claim);
        let result = bind_row!(
            batch.bind(sqlx::query_scalar(crate::pg::log::append_sql!(concat!(
                "a AS (",
                insert_sql!(
                    "$8", "$9", "$10", "$11", "$12", "$13", "$14", "$15", "$16", "$17", "$18",
                    "$19", "$20", "$21", "$22", "$23", "$24", "$25", "$26", "$27", "$28", "$29",
                    "$30", "$31", "$32", "$33", "$34", "$35"
                ),
                "), "
            ))),),
            &row
        )
        .fetch_one(&self.pool)
        .await
        .map_err(StoreError::from);
        drop(row);
        let queued = match result {
            Ok(pos) if !batch.is_empty() => Ok(Some((batch, pos))),
            Ok(_) => Ok(None),
            Err(e) => Err(e),
        };
        let written = self.committed(queued).await?;
        Ok(Inserted::new(action, true, rendered(written)))
    }
}

/// The last event about an action among `written`: it carries the action
/// as stored.
fn rendered(
    written: Vec<actiongate_api::model::Event>,
) -> Option<std::sync::Arc<actiongate_api::model::Event>> {
    written
        .into_iter()
        .rev()
        .find(|ev| ev.kind.starts_with("action."))
        .map(std::sync::Arc::new)
}
