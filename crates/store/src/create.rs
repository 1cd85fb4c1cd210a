//! The hot write: new actions with nothing to read first (no idempotency key,
//! no handler). The writer inserts every one of them queued in a batch with
//! one statement per table, instead of four round trips to the connection's
//! thread per action (savepoint, action row, event row, release), and knows
//! the events it wrote without reading them back.

use std::collections::HashMap;

use serde_json::Value;
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection};
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::actions::{NewAction, event_for};
use crate::error::StoreError;
use crate::model::{Action, Event};
use crate::time::{now, to_ms};

/// Where the caller of a [`CreateJob`] receives its answer.
pub(crate) type Answer = oneshot::Receiver<Result<(Action, bool), StoreError>>;

/// A new action prepared by its caller (rows built, JSON rendered), waiting
/// in the writer's queue for its answer.
pub(crate) struct CreateJob {
    /// The action as it will be stored and answered.
    pub(crate) action: Action,
    rule: Option<String>,
    request_hash: String,
    /// The event recording it; `seq` is filled in by the insert.
    pub(crate) event: Event,
    event_data: String,
    reply: oneshot::Sender<Result<(Action, bool), StoreError>>,
}

impl CreateJob {
    /// Whether `new` can take this path: nothing must be read before it is
    /// inserted, and it records exactly one event.
    pub(crate) fn applies(new: &NewAction) -> bool {
        new.idempotency_key.is_none() && new.handler.is_none()
    }

    /// Builds the rows of `new` (see [`CreateJob::applies`]) and the
    /// receiver of its answer.
    pub(crate) fn prepare(mut new: NewAction) -> Result<(CreateJob, Answer), StoreError> {
        let created = now();
        let rule = new.decision.rule.as_ref().map(Value::to_string);
        let request_hash = std::mem::take(&mut new.request_hash);
        let action = crate::actions::stored_action(new, created);
        let ev = event_for(&action, crate::actions::created_kind(action.status))?;
        let event_data = ev.data.to_string();
        let event = Event {
            seq: 0,
            id: Uuid::now_v7().to_string(),
            kind: ev.kind.to_owned(),
            at: created,
            agent: ev.agent,
            action_id: ev.action_id,
            grant_id: None,
            data: ev.data,
        };
        let (reply, rx) = oneshot::channel();
        Ok((
            CreateJob {
                action,
                rule,
                request_hash,
                event,
                event_data,
                reply,
            },
            rx,
        ))
    }

    /// Answers the caller.
    pub(crate) fn answer(self, result: Result<(), StoreError>) {
        // The caller may have gone away (client disconnected); the change
        // stands either way.
        let _ = self.reply.send(result.map(|()| (self.action, true)));
    }
}

/// What the inserts of a group are wrapped in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wrap {
    /// Nothing: the caller's transaction holds only this group.
    Bare,
    /// Savepoint `grp`, inside the caller's transaction.
    Savepoint,
    /// A transaction of their own, committed in the same hand-off.
    Transaction,
}

/// Inserts the actions of `group` and their events in one hand-off to the
/// connection's thread, wrapped as `wrap` says, and fills in the events'
/// `seq`. All or nothing: on an error the caller rolls back to the savepoint
/// (or the transaction).
pub(crate) async fn insert_group_on(
    conn: &mut SqliteConnection,
    group: &mut [Box<CreateJob>],
    wrap: Wrap,
) -> Result<(), StoreError> {
    let mut q: QueryBuilder<Sqlite> = QueryBuilder::new(match wrap {
        Wrap::Bare => "",
        Wrap::Savepoint => "SAVEPOINT grp; ",
        Wrap::Transaction => "BEGIN IMMEDIATE; ",
    });
    q.push(
        "INSERT INTO actions (id, agent, tool, detail, action_string, reason, status, \
         decision_result, decision_reason, decision_rule, created_at, decided_at, decided_by, \
         deadline, settled_at, request_hash) ",
    );
    q.push_values(group.iter(), |mut row, job| {
        let a = &job.action;
        let decided = a.decided_at.map(to_ms);
        row.push_bind(a.id.clone())
            .push_bind(a.agent.clone())
            .push_bind(a.tool.clone())
            .push_bind(a.detail.clone())
            .push_bind(a.action_string.clone())
            .push_bind(a.reason.clone())
            .push_bind(a.status.as_str())
            .push_bind(a.decision.result.as_str())
            .push_bind(a.decision.reason.clone())
            .push_bind(job.rule.clone())
            .push_bind(to_ms(a.created_at))
            .push_bind(decided)
            .push_bind(a.decided_by.clone())
            .push_bind(a.deadline.map(to_ms))
            .push_bind(decided)
            .push_bind(job.request_hash.clone());
    });
    // Like every other event's, `at` is the time of the transaction that
    // writes it, not of the request (which may have queued meanwhile).
    let at = now();
    for job in group.iter_mut() {
        job.event.at = at;
    }
    q.push("; INSERT INTO events (id, type, at, agent, action_id, grant_id, data) ");
    q.push_values(group.iter(), |mut row, job| {
        let e = &job.event;
        row.push_bind(e.id.clone())
            .push_bind(e.kind.clone())
            .push_bind(to_ms(at))
            .push_bind(e.agent.clone())
            .push_bind(e.action_id.clone())
            .push_bind(None::<String>)
            .push_bind(job.event_data.clone());
    });
    q.push(" RETURNING seq, id");
    match wrap {
        Wrap::Bare => {}
        Wrap::Savepoint => {
            q.push("; RELEASE grp");
        }
        Wrap::Transaction => {
            q.push("; COMMIT");
        }
    }
    // The text differs with the group's size: not worth a cache slot each.
    let rows = q.build().persistent(false).fetch_all(&mut *conn).await?;
    let mut seqs: HashMap<String, i64> = HashMap::with_capacity(rows.len());
    for row in &rows {
        seqs.insert(row.try_get("id")?, row.try_get("seq")?);
    }
    for job in group.iter_mut() {
        job.event.seq = seqs
            .get(&job.event.id)
            .copied()
            .ok_or_else(|| StoreError::Corrupt(format!("no seq for event {}", job.event.id)))?;
    }
    Ok(())
}

impl CreateJob {
    /// Its event, once committed, to publish.
    pub(crate) fn take_event(&mut self) -> Event {
        std::mem::replace(&mut self.event, placeholder_event())
    }
}

fn placeholder_event() -> Event {
    Event {
        seq: 0,
        id: String::new(),
        kind: String::new(),
        at: chrono::DateTime::<chrono::Utc>::default(),
        agent: None,
        action_id: None,
        grant_id: None,
        data: Value::Null,
    }
}
