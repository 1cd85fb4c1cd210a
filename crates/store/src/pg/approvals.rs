//! Team decisions on Postgres (see `crate::approvals`): the action's row
//! is locked (`FOR UPDATE`) before it is read, so a second daemon's
//! approval waits for the first's commit and plans from what it wrote.

use serde_json::Value;
use sqlx::PgConnection;

use crate::actions::{action_columns, event_for, from_row};
use crate::approvals::{
    TeamDecided, TeamDecision, escalation, plan, team_text, to_recheck, with_gone, without_lapsed,
};
use crate::error::StoreError;
use crate::events::NewEvent;
use crate::pg::Postgres;
use crate::time::{now, to_ms};
use actiongate_api::model::{Action, ActionStatus};
use actiongate_api::teams::Team;

async fn locked(conn: &mut PgConnection, id: &str) -> Result<Option<Action>, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT ",
        action_columns!(),
        " FROM actions WHERE id = $1 FOR UPDATE"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// Of `identities`, those that are no longer a person's (only people's
/// approvals count toward a quorum), or name a revoked key. The rows read
/// are share-locked: a revocation or a removal in flight is waited for
/// and then seen, and one that comes later waits for this decision's
/// commit.
async fn gone_on(conn: &mut PgConnection, identities: &[&str]) -> Result<Vec<String>, StoreError> {
    let mut gone = Vec::new();
    for by in identities {
        let person: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM person_identities WHERE identity = $1 FOR SHARE")
                .bind(*by)
                .fetch_optional(&mut *conn)
                .await?;
        let revoked = match by.strip_prefix("key:") {
            None => false,
            Some(key) => sqlx::query_scalar::<_, bool>(
                "SELECT revoked_at IS NOT NULL FROM api_keys WHERE id = $1 FOR SHARE",
            )
            .bind(key)
            .fetch_optional(&mut *conn)
            .await?
            .unwrap_or(false),
        };
        if person.is_none() || revoked {
            gone.push((*by).to_owned());
        }
    }
    Ok(gone)
}

/// Refuses (409) when the person of any of `seen` is not as the gate
/// read it. The rows read are share-locked: a change in flight is waited
/// for and then seen, and one that comes later waits for this commit.
async fn people_unchanged(
    conn: &mut PgConnection,
    seen: &[crate::PersonSeen],
) -> Result<(), StoreError> {
    for s in seen {
        let now = crate::pg::people::person_on(&mut *conn, &s.identity, true).await?;
        crate::people_seen::unchanged(s, now.as_ref())?;
    }
    Ok(())
}

/// One person's decision on pending action `id`, planned from its row as
/// locked: what it did, and its event (not yet written).
pub(crate) async fn decide_on(
    conn: &mut PgConnection,
    id: &str,
    d: &TeamDecision,
) -> Result<(TeamDecided, NewEvent), StoreError> {
    let current = locked(conn, id).await?.ok_or(StoreError::NotFound)?;
    people_unchanged(conn, &d.people_seen).await?;
    let gone = gone_on(conn, &to_recheck(&current, d)).await?;
    let rechecked;
    let d = if gone.is_empty() {
        d
    } else {
        rechecked = with_gone(d, gone);
        &rechecked
    };
    let same_person: Vec<String> = sqlx::query_scalar(
        "SELECT identity FROM person_identities WHERE person_id = \
         (SELECT person_id FROM person_identities WHERE identity = $1)",
    )
    .bind(&d.entry.by)
    .fetch_all(&mut *conn)
    .await?;
    let at = now();
    let p = plan(&current, d, at, &same_person)?;
    let ms = to_ms(at);
    let row = match p.status {
        Some(status) => {
            sqlx::query(concat!(
                "UPDATE actions SET team = $2, status = $3, decided_at = $4, decided_by = $5, \
                 decision_note = COALESCE($6, decision_note), settled_at = $4, \
                 params = COALESCE($7, params), decision_rule = COALESCE($8, decision_rule) \
                 WHERE id = $1 AND status = 'pending' RETURNING ",
                action_columns!()
            ))
            .bind(id)
            .bind(team_text(&p.team)?)
            .bind(status.as_str())
            .bind(ms)
            .bind(&d.entry.by)
            .bind(&d.note)
            .bind(p.params.as_ref().map(Value::to_string))
            .bind(p.rule_text())
            .fetch_one(&mut *conn)
            .await?
        }
        None => {
            sqlx::query(concat!(
                "UPDATE actions SET team = $2, params = COALESCE($3, params), \
                 decision_rule = COALESCE($4, decision_rule) \
                 WHERE id = $1 AND status = 'pending' RETURNING ",
                action_columns!()
            ))
            .bind(id)
            .bind(team_text(&p.team)?)
            .bind(p.params.as_ref().map(Value::to_string))
            .bind(p.rule_text())
            .fetch_one(&mut *conn)
            .await?
        }
    };
    let action = from_row(&row)?;
    if p.status == Some(ActionStatus::Approved) && d.taints {
        crate::pg::sessions::mark_taint_on(conn, &action).await?;
    }
    let event = event_for(&action, p.event)?;
    Ok((
        TeamDecided {
            settled: p.status.is_some(),
            action,
        },
        event,
    ))
}

impl Postgres {
    /// The actions asked after event `seq`: `(seq, id)` of their
    /// `action.enqueued` events, oldest first, at most `limit`.
    pub async fn enqueued_after(
        &self,
        seq: i64,
        limit: i64,
    ) -> Result<Vec<(i64, String)>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT seq, action_id FROM events WHERE seq > $1 AND type = 'action.enqueued' \
             AND action_id IS NOT NULL ORDER BY seq LIMIT $2",
        )
        .bind(seq)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// One person's decision on pending action `id` (see [`TeamDecision`]).
    pub async fn team_decide(&self, id: &str, d: TeamDecision) -> Result<TeamDecided, StoreError> {
        let mut tx = self.begin().await?;
        let (decided, event) = decide_on(&mut tx, id, &d).await?;
        self.commit(tx, vec![event]).await?;
        Ok(decided)
    }

    /// Marks pending action `id` escalated and writes `action.escalated`,
    /// once, whichever daemon's sweep comes first.
    pub async fn escalate(&self, id: &str) -> Result<Option<Action>, StoreError> {
        self.change_team(id, "action.escalated", escalation).await
    }

    /// Drops the approvals of pending action `id` given through `lapsed`,
    /// with an `action.approval` event: `None` when it holds none of them
    /// or is no longer pending.
    pub async fn drop_lapsed(
        &self,
        id: &str,
        lapsed: Vec<String>,
    ) -> Result<Option<Action>, StoreError> {
        self.change_team(id, "action.approval", |a, at| {
            without_lapsed(a, &lapsed, at)
        })
        .await
    }

    /// Writes the team record `change` makes of action `id` as read under
    /// its row's lock, and commits it with its event of `kind`; `None`
    /// when it makes none.
    async fn change_team(
        &self,
        id: &str,
        kind: &'static str,
        change: impl FnOnce(&Action, chrono::DateTime<chrono::Utc>) -> Option<Team>,
    ) -> Result<Option<Action>, StoreError> {
        let mut tx = self.begin().await?;
        let Some(current) = locked(&mut tx, id).await? else {
            return Ok(None);
        };
        let Some(team) = change(&current, now()) else {
            return Ok(None);
        };
        let row = sqlx::query(concat!(
            "UPDATE actions SET team = $2 WHERE id = $1 AND status = 'pending' RETURNING ",
            action_columns!()
        ))
        .bind(id)
        .bind(team_text(&team)?)
        .fetch_one(&mut *tx)
        .await?;
        let action = from_row(&row)?;
        let event = event_for(&action, kind)?;
        self.commit(tx, vec![event]).await?;
        Ok(Some(action))
    }
}
