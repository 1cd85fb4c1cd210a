//! Team decisions on a pending action (`docs/teams.md`): one approval of
//! a quorum, the approval that completes it, a denial, an edit made with
//! the first approval, and escalation. Each is planned from the action as
//! read under the row's lock (SQLite: the one writer connection; Postgres:
//! `FOR UPDATE`) and written with its event in the same transaction, so
//! two approvals at once, on one daemon or two, are counted once each and
//! settle the action once.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::SqliteConnection;

use crate::SqliteStore;
use crate::actions::{action_columns, event_for, from_row, get_on};
use crate::error::StoreError;
use crate::events::{self, NewEvent};
use crate::time::{now, to_ms};
use actiongate_api::model::{Action, ActionStatus};
use actiongate_api::teams::{ApprovalEntry, Seen, Team};

/// An edit an approver makes with the first approval.
#[derive(Debug, Clone)]
pub struct Edit {
    /// Handler actions: the params to run (only the executor sees them).
    pub params: Option<Value>,
    /// Handler actions: the same, sensitive values masked.
    pub params_view: Option<Value>,
    /// Decision-only actions: the detail to run.
    pub detail: Option<String>,
    /// Handler actions: the action string of the params to run, as the
    /// handler's registration renders it now.
    pub action_string: Option<String>,
    /// The action's recorded decision rule (JSON) with copies of the
    /// approvals rules the edited action falls under added, when it falls
    /// under any: they bind every later decision on it as the rules it was
    /// asked under do.
    pub decision_rule: Option<Value>,
}

/// One person's decision on a pending action.
#[derive(Debug, Clone)]
pub struct TeamDecision {
    /// Approve (`true`) or deny.
    pub approve: bool,
    /// Who, through which identity and channel, when.
    pub entry: ApprovalEntry,
    /// How many approvals from distinct people the action needs.
    pub required: u32,
    /// The note (approve) or reason (deny).
    pub note: Option<String>,
    /// An edit, with the first approval only.
    pub edit: Option<Edit>,
    /// Which version the decider read (a chat card shows only the action
    /// as asked): an approval is refused when the action is otherwise, so
    /// it never approves a version its decider did not read.
    pub seen: Option<Seen>,
    /// The identities whose earlier approvals no longer count (their
    /// approver could not give them now): dropped before this one is
    /// counted. An approval that landed since the decider read the action
    /// was checked as it landed, and counts.
    pub lapsed: Vec<String>,
    /// Whether the action reads untrusted content under its agent's
    /// profile (as asked, or as edited): an approval that settles it
    /// taints its session in the same transaction.
    pub taints: bool,
    /// The persons the gate's approver checks read (the decider's, and
    /// each earlier approval's): the decision is refused (409) when any
    /// changed before its transaction.
    pub people_seen: Vec<crate::PersonSeen>,
}

/// What a team decision did.
#[derive(Debug, Clone)]
pub struct TeamDecided {
    /// The action as it is now.
    pub action: Action,
    /// Whether it settled (approved or denied) with this decision.
    pub settled: bool,
}

/// What to write for `d` on `current`, checked: the new status (when it
/// settles), the team record, the event.
pub(crate) struct Plan {
    pub(crate) status: Option<ActionStatus>,
    pub(crate) team: Team,
    pub(crate) event: &'static str,
    pub(crate) params: Option<Value>,
    pub(crate) decision_rule: Option<Value>,
}

impl Plan {
    /// The decision rule to write, as its column holds it (`None`: keep).
    pub(crate) fn rule_text(&self) -> Option<String> {
        self.decision_rule.as_ref().map(Value::to_string)
    }
}

/// `same_person` holds every identity of the person `d` comes through,
/// as stored now (empty when the identity is nobody's): an approval
/// recorded through any of them is that person's, whatever name it was
/// recorded under.
pub(crate) fn plan(
    current: &Action,
    d: &TeamDecision,
    at: DateTime<Utc>,
    same_person: &[String],
) -> Result<Plan, StoreError> {
    let expired = current.deadline.is_some_and(|dl| dl <= at);
    if current.status != ActionStatus::Pending || expired {
        return Err(StoreError::WrongState {
            current: if current.status == ActionStatus::Pending {
                ActionStatus::Expired.to_string()
            } else {
                current.status.to_string()
            },
        });
    }
    let mut team = current.team.clone();
    let mut params = None;
    let mut decision_rule = None;
    if !d.approve {
        team.decided_person = Some(d.entry.who.clone());
        team.decided_channel = Some(d.entry.channel.clone());
        return Ok(Plan {
            status: Some(ActionStatus::Denied),
            team,
            event: "action.denied",
            params,
            decision_rule,
        });
    }
    team.approvals.retain(|a| !d.lapsed.contains(&a.by));
    // What earlier approvals needed still holds (an edit may have raised
    // it): a later decider's own reckoning never lowers it.
    let required = d.required.max(team.approvals_required.unwrap_or(1));
    // The same person, or the same identity (its person changed since it
    // approved, so it would now count as someone else), approves once; so
    // does a person renamed since approving through another identity.
    if team
        .approvals
        .iter()
        .any(|a| a.who == d.entry.who || a.by == d.entry.by || same_person.contains(&a.by))
    {
        return Err(StoreError::Conflict(format!(
            "{} has already approved this action; it needs approvals from {} distinct people",
            d.entry.who, required
        )));
    }
    match (d.seen, team.edited) {
        (Some(Seen::Asked), true) => {
            let what = match &team.approved_detail {
                Some(detail) => format!("it would run `{detail}`"),
                None => "its params were changed".to_owned(),
            };
            return Err(StoreError::Conflict(format!(
                "{} edited this action before approving ({what}): this approval was for the \
                 action as asked. Read it again where the edit is shown (the web page, \
                 `actiongate show`) and approve it as edited, or deny it",
                team.approvals
                    .first()
                    .map_or("an approver", |a| a.who.as_str())
            )));
        }
        (Some(Seen::Edited), false) => {
            return Err(StoreError::Conflict(
                "nobody edited this action: this approval was for an edited version it does \
                 not have; read it again"
                    .to_owned(),
            ));
        }
        _ => {}
    }
    if let Some(edit) = &d.edit {
        // Once: `seen: "edited"` names no version, so an approval of the
        // first edit must never approve a second (its editor's approval
        // may have lapsed meanwhile, leaving none).
        if team.edited {
            return Err(StoreError::Conflict(
                "this action was edited once already, and is edited only once: approve it as \
                 edited, or deny it to have the agent ask again"
                    .to_owned(),
            ));
        }
        if !team.approvals.is_empty() {
            return Err(StoreError::Conflict(
                "an edit comes with the first approval: others have approved what is shown; \
                 deny it to have the agent ask again"
                    .to_owned(),
            ));
        }
        team.edited = true;
        team.approved_params = edit.params_view.clone();
        team.approved_detail = edit.detail.clone();
        team.approved_action_string = edit.action_string.clone();
        params = edit.params.clone();
        decision_rule = edit.decision_rule.clone();
    }
    team.approvals.push(d.entry.clone());
    team.approvals_required = Some(required);
    let done = team.approvals.len() >= required as usize;
    if done {
        team.decided_person = Some(d.entry.who.clone());
        team.decided_channel = Some(d.entry.channel.clone());
    }
    Ok(Plan {
        status: done.then_some(ActionStatus::Approved),
        team,
        event: if done {
            "action.approved"
        } else {
            "action.approval"
        },
        params,
        decision_rule,
    })
}

/// The team record as its column holds it.
pub(crate) fn team_text(team: &Team) -> Result<Option<String>, StoreError> {
    if team.is_empty() {
        Ok(None)
    } else {
        Ok(Some(serde_json::to_string(team)?))
    }
}

/// Refuses a decision that left its action pending where one approval
/// must settle it ("approve and remember" approves once, for one person).
pub(crate) fn settled_by_one(decided: &TeamDecided) -> Result<(), StoreError> {
    if decided.settled {
        Ok(())
    } else {
        Err(StoreError::Conflict(
            "this action needs approvals from more than one person: approve it without remember"
                .to_owned(),
        ))
    }
}

/// `d` with the earlier approvals of `current` that no longer count as
/// read now added to its lapsed ones: `gone` tells whether an approval's
/// identity is still a person's and, for a key, the key not revoked. The
/// gate worked out the lapsed approvals before this transaction; a key
/// revoked or a person removed since then is seen here, under the lock,
/// so an approval answered after the revocation never counts it.
pub(crate) fn with_gone(d: &TeamDecision, gone: Vec<String>) -> TeamDecision {
    let mut d = d.clone();
    d.lapsed.extend(gone);
    d
}

/// The identities of `current`'s earlier approvals an approval `d` should
/// still look at (not already lapsed).
pub(crate) fn to_recheck<'a>(current: &'a Action, d: &TeamDecision) -> Vec<&'a str> {
    if !d.approve {
        return Vec::new();
    }
    current
        .team
        .approvals
        .iter()
        .map(|a| a.by.as_str())
        .filter(|by| !d.lapsed.iter().any(|l| l == by))
        .collect()
}

/// Of `identities`, those that are no longer a person's (only people's
/// approvals count toward a quorum), or name a revoked key (SQLite: read
/// on the one writer connection, so nothing commits in between).
async fn gone_on(
    conn: &mut SqliteConnection,
    identities: &[&str],
) -> Result<Vec<String>, StoreError> {
    let mut gone = Vec::new();
    for by in identities {
        let live: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM person_identities WHERE identity = ?1) \
             AND NOT EXISTS (SELECT 1 FROM api_keys WHERE substr(?1, 1, 4) = 'key:' \
             AND id = substr(?1, 5) AND revoked_at IS NOT NULL)",
        )
        .bind(*by)
        .fetch_one(&mut *conn)
        .await?;
        if !live {
            gone.push((*by).to_owned());
        }
    }
    Ok(gone)
}

pub(crate) async fn decide_on(
    conn: &mut SqliteConnection,
    id: &str,
    d: &TeamDecision,
) -> Result<(TeamDecided, NewEvent), StoreError> {
    let current = get_on(conn, id).await?.ok_or(StoreError::NotFound)?;
    crate::people_seen::check_on(conn, &d.people_seen).await?;
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
         (SELECT person_id FROM person_identities WHERE identity = ?)",
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
                "UPDATE actions SET team = ?2, status = ?3, decided_at = ?4, decided_by = ?5, \
             decision_note = COALESCE(?6, decision_note), settled_at = ?4, \
             params = COALESCE(?7, params), decision_rule = COALESCE(?8, decision_rule) \
             WHERE id = ?1 AND status = 'pending' RETURNING ",
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
                "UPDATE actions SET team = ?2, params = COALESCE(?3, params), \
             decision_rule = COALESCE(?4, decision_rule) \
             WHERE id = ?1 AND status = 'pending' RETURNING ",
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
        crate::sessions::mark_taint_on(conn, &action).await?;
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

/// `current`'s team without the approvals given through `lapsed`, when it
/// is still pending and holds any of them.
pub(crate) fn without_lapsed(
    current: &Action,
    lapsed: &[String],
    at: DateTime<Utc>,
) -> Option<Team> {
    let live = current.status == ActionStatus::Pending && current.deadline.is_none_or(|dl| dl > at);
    if !live {
        return None;
    }
    let mut team = current.team.clone();
    let before = team.approvals.len();
    team.approvals.retain(|a| !lapsed.contains(&a.by));
    (team.approvals.len() < before).then_some(team)
}

/// Writes `team` to pending action `id` with its event of `kind`.
async fn set_team_on(
    conn: &mut SqliteConnection,
    id: &str,
    team: &Team,
    kind: &'static str,
) -> Result<Action, StoreError> {
    let row = sqlx::query(concat!(
        "UPDATE actions SET team = ?2 WHERE id = ?1 AND status = 'pending' RETURNING ",
        action_columns!()
    ))
    .bind(id)
    .bind(team_text(team)?)
    .fetch_one(&mut *conn)
    .await?;
    let action = from_row(&row)?;
    events::insert_on(conn, &event_for(&action, kind)?).await?;
    Ok(action)
}

/// Whether `current` may be escalated now: still pending, not yet.
pub(crate) fn escalation(current: &Action, at: DateTime<Utc>) -> Option<Team> {
    let live = current.status == ActionStatus::Pending
        && current.deadline.is_none_or(|dl| dl > at)
        && current.team.escalated_at.is_none();
    live.then(|| Team {
        escalated_at: Some(at),
        ..current.team.clone()
    })
}

/// `(seq, action)` of the `action.enqueued` events after `?1` (an action
/// is stored pending with one, and becomes pending no other way), oldest
/// first, at most `?2`. The escalation sweep asks every second: read by
/// the primary key's range, only events since its last look, so an idle
/// daemon reads nothing however many actions wait (reading every pending
/// id each second was most of what an idle one did with 10,000 waiting).
pub(crate) const ENQUEUED_AFTER: &str = "SELECT seq, action_id FROM events \
     WHERE seq > ?1 AND type = 'action.enqueued' AND action_id IS NOT NULL ORDER BY seq LIMIT ?2";

impl SqliteStore {
    /// The actions asked after event `seq`: `(seq, id)` of their
    /// `action.enqueued` events, oldest first, at most `limit`.
    pub async fn enqueued_after(
        &self,
        seq: i64,
        limit: i64,
    ) -> Result<Vec<(i64, String)>, StoreError> {
        Ok(sqlx::query_as(ENQUEUED_AFTER)
            .bind(seq)
            .bind(limit)
            .fetch_all(&self.read)
            .await?)
    }

    /// One person's decision on pending action `id` (see [`TeamDecision`]).
    pub async fn team_decide(&self, id: &str, d: TeamDecision) -> Result<TeamDecided, StoreError> {
        let id = id.to_owned();
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let (decided, event) = decide_on(conn, &id, &d).await?;
                    events::insert_on(conn, &event).await?;
                    Ok(decided)
                })
            })
            .await
    }

    /// Drops the approvals of pending action `id` given through `lapsed`,
    /// with an `action.approval` event: `None` when it holds none of them
    /// or is no longer pending.
    pub async fn drop_lapsed(
        &self,
        id: &str,
        lapsed: Vec<String>,
    ) -> Result<Option<Action>, StoreError> {
        self.change_team(id, "action.approval", move |a, at| {
            without_lapsed(a, &lapsed, at)
        })
        .await
    }

    /// Marks pending action `id` escalated and writes `action.escalated`,
    /// once: `None` when it was escalated before or is no longer pending.
    pub async fn escalate(&self, id: &str) -> Result<Option<Action>, StoreError> {
        self.change_team(id, "action.escalated", escalation).await
    }

    /// Writes the team record `change` makes of action `id` as read under
    /// the writer, with its event of `kind`; `None` when it makes none.
    async fn change_team(
        &self,
        id: &str,
        kind: &'static str,
        change: impl FnOnce(&Action, DateTime<Utc>) -> Option<Team> + Send + 'static,
    ) -> Result<Option<Action>, StoreError> {
        let id = id.to_owned();
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let Some(current) = get_on(conn, &id).await? else {
                        return Ok(None);
                    };
                    let Some(team) = change(&current, now()) else {
                        return Ok(None);
                    };
                    set_team_on(conn, &id, &team, kind).await.map(Some)
                })
            })
            .await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::str::FromStr;

    use sqlx::ConnectOptions;
    use sqlx::sqlite::SqliteConnectOptions;

    #[tokio::test]
    async fn the_escalation_sweep_reads_only_new_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        crate::migrate(&path).await.unwrap();
        let mut conn = SqliteConnectOptions::from_str("sqlite://")
            .unwrap()
            .filename(&path)
            .connect()
            .await
            .unwrap();
        let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "EXPLAIN QUERY PLAN {}",
            super::ENQUEUED_AFTER
        )))
        .bind(5_i64)
        .bind(100_i64)
        .fetch_all(&mut conn)
        .await
        .unwrap();
        let steps: Vec<&str> = plan.iter().map(|p| p.3.as_str()).collect();
        assert_eq!(
            steps,
            ["SEARCH events USING INTEGER PRIMARY KEY (rowid>?)"],
            "{steps:?}"
        );
    }
}
