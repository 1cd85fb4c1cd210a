//! The hot write: new actions with nothing to read first (no idempotency
//! key), decision-only or for a handler. Each is prepared here as rows
//! ([`CreateJob::action_row`], [`CreateJob::event_row`]) that the writer
//! inserts for a whole batch at once: through its synchronous connection
//! with prepared single-row inserts ([`crate::direct`]), or through sqlx
//! with one statement per table ([`push_inserts`]) when other work shares
//! the batch or the direct write failed. Either way the writer knows the
//! events it wrote without reading them back.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::{QueryBuilder, Sqlite};
use tokio::sync::oneshot;

use crate::actions::{NewAction, claim_of, created_events};
use crate::error::StoreError;
use crate::time::{from_ms, now, to_ms};
use actiongate_api::model::{Action, Decision, Event};
use serde_json::Value;

/// Where the caller of a [`CreateJob`] receives its answer: the job itself,
/// so that what the caller's thread allocated is freed there too.
pub(crate) type Answer = oneshot::Receiver<Result<Box<CreateJob>, StoreError>>;

/// A new action prepared by its caller (rows built, JSON rendered), waiting
/// in the writer's queue for its answer.
///
/// Everything in it is allocated on the caller's thread and, once written,
/// handed back to be freed there: freeing it on the writer's thread would
/// take the lock of another thread's malloc arena for every piece, and the
/// two threads then queue on each other's locks.
pub(crate) struct CreateJob {
    /// The action as it will be stored and answered.
    pub(crate) action: Action,
    rule: Option<String>,
    /// A handler action's params as sent (the action shows them masked).
    params: Option<String>,
    /// The JSON columns of a handler action as stored.
    params_view: Option<String>,
    scope: Option<String>,
    display: Option<String>,
    hints: Option<String>,
    /// When it is stored claimed for its first attempt, in ms.
    claim_until: Option<i64>,
    /// The events recording it, in order; `seq` is filled in by the insert.
    /// Shared as they will be published (see the type's docs).
    events: Vec<Arc<Event>>,
    /// What the first event's `data` column holds instead of its JSON,
    /// when that is stored by reference to the row (`crate::event_ref`).
    first_stored: Option<String>,
    reply: Option<oneshot::Sender<Result<Box<CreateJob>, StoreError>>>,
}

impl CreateJob {
    /// Whether `new` can take this path: nothing must be read before it is
    /// inserted (no idempotency key to look up).
    pub(crate) fn applies(new: &NewAction) -> bool {
        new.idempotency_key.is_none()
    }

    /// Builds the rows of `new` (see [`CreateJob::applies`]) and the
    /// receiver of its answer.
    pub(crate) fn prepare(new: NewAction) -> Result<(CreateJob, Answer), StoreError> {
        let created = now();
        let rule = json(new.decision.rule.as_ref())?;
        let claim_until = claim_of(&new).map(to_ms);
        let params = json(new.handler.as_ref().map(|h| &h.params))?;
        let mut action = crate::actions::stored_action(new, created);
        let params_view = json(action.params.as_ref())?;
        let scope = json(action.scope.as_ref())?;
        let display = json(action.display.as_ref())?;
        let hints = json(action.hints.as_ref())?;
        let created_events = created_events(&mut action, claim_until.is_some())?;
        let events: Vec<Arc<Event>> = created_events
            .into_iter()
            .map(|ev| Arc::new(ev.prepare(created)))
            .collect();
        let first_stored = match events.as_slice() {
            [only] => crate::event_ref::reference(
                &action,
                &only.data,
                rule.as_deref(),
                params_view.as_deref(),
            ),
            _ => None,
        };
        let (reply, rx) = oneshot::channel();
        Ok((
            CreateJob {
                action,
                rule,
                params,
                params_view,
                scope,
                display,
                hints,
                claim_until,
                events,
                first_stored,
                reply: Some(reply),
            },
            rx,
        ))
    }

    /// Answers the caller, handing the job back (see the type's docs).
    pub(crate) fn answer(mut self: Box<Self>, result: Result<(), StoreError>) {
        if let Some(reply) = self.reply.take() {
            // The caller may have gone away (client disconnected); the
            // change stands either way.
            let _ = reply.send(result.map(|()| self));
        }
    }
}

/// A JSON column's text. `serde_json::to_string`, not `Value`'s `Display`:
/// that writes through a formatter, a call per token, at twice the cost.
fn json<T: serde::Serialize>(v: Option<&T>) -> Result<Option<String>, serde_json::Error> {
    v.map(serde_json::to_string).transpose()
}

/// The columns of an action row as [`CreateJob::action_row`] lists them.
pub(crate) const ACTION_COLUMNS: &str = "id, agent, tool, detail, action_string, reason, status, \
     decision_result, decision_reason, decision_rule, created_at, decided_at, decided_by, \
     deadline, settled_at, request_hash, handler, action_name, params, params_view, \
     permission, scope, display, hints, attempts, lease_until, session, runtime";

/// How many columns [`ACTION_COLUMNS`] names.
pub(crate) const ACTION_WIDTH: usize = 28;

/// The columns of an event row as [`CreateJob::event_row`] lists them.
pub(crate) const EVENT_COLUMNS: &str = "id, type, at, agent, action_id, grant_id, data";

/// How many columns [`EVENT_COLUMNS`] names.
pub(crate) const EVENT_WIDTH: usize = 7;

/// A column value of a row about to be inserted, borrowed from the job: the
/// same row feeds sqlx's multi-row insert and the writer's direct one.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Val<'a> {
    Text(Option<&'a str>),
    Int(Option<i64>),
}

impl Val<'_> {
    /// Binds it as the next value of a sqlx `VALUES` row.
    fn push(self, row: &mut sqlx::query_builder::Separated<'_, Sqlite, &'static str>) {
        match self {
            Val::Text(t) => row.push_bind(t.map(str::to_owned)),
            Val::Int(i) => row.push_bind(i),
        };
    }
}

impl rusqlite::ToSql for Val<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value as Sql, ValueRef};
        Ok(match *self {
            Val::Text(Some(t)) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            Val::Int(Some(i)) => ToSqlOutput::Owned(Sql::Integer(i)),
            Val::Text(None) | Val::Int(None) => ToSqlOutput::Owned(Sql::Null),
        })
    }
}

impl CreateJob {
    /// Its action row, in [`ACTION_COLUMNS`] order.
    pub(crate) fn action_row(&self) -> [Val<'_>; ACTION_WIDTH] {
        let a = &self.action;
        let decided = a.decided_at.map(to_ms);
        [
            Val::Text(Some(&a.id)),
            Val::Text(Some(&a.agent)),
            Val::Text(Some(&a.tool)),
            Val::Text(Some(&a.detail)),
            Val::Text(Some(&a.action_string)),
            Val::Text(a.reason.as_deref()),
            Val::Text(Some(a.status.as_str())),
            Val::Text(Some(a.decision.result.as_str())),
            Val::Text(Some(&a.decision.reason)),
            Val::Text(self.rule.as_deref()),
            Val::Int(Some(to_ms(a.created_at))),
            Val::Int(decided),
            Val::Text(a.decided_by.as_deref()),
            Val::Int(a.deadline.map(to_ms)),
            // Settled when decided: approved (decision-only), denied.
            Val::Int(decided),
            // No idempotency key (see `applies`): nothing to compare.
            Val::Text(None),
            Val::Text(a.handler.as_deref()),
            Val::Text(a.action.as_deref()),
            Val::Text(self.params.as_deref()),
            Val::Text(self.params_view.as_deref()),
            Val::Text(a.permission.as_deref()),
            Val::Text(self.scope.as_deref()),
            Val::Text(self.display.as_deref()),
            Val::Text(self.hints.as_deref()),
            Val::Int(Some(i64::from(self.claim_until.is_some()))),
            Val::Int(self.claim_until),
            Val::Text(a.session.as_deref()),
            Val::Text(a.runtime.as_deref()),
        ]
    }

    /// Its `i`th event's row, in [`EVENT_COLUMNS`] order, written at `at`.
    pub(crate) fn event_row(&self, i: usize, at: i64) -> [Val<'_>; EVENT_WIDTH] {
        let e = &self.events[i];
        [
            Val::Text(Some(&e.id)),
            Val::Text(Some(&e.kind)),
            Val::Int(Some(at)),
            Val::Text(e.agent.as_deref()),
            Val::Text(e.action_id.as_deref()),
            Val::Text(None),
            Val::Text(Some(self.stored_data(i))),
        ]
    }

    /// What its `i`th event's `data` column holds: the event's JSON, or
    /// for the first a reference to the row (`crate::event_ref`).
    pub(crate) fn stored_data(&self, i: usize) -> &str {
        match (i, &self.first_stored) {
            (0, Some(mark)) => mark,
            _ => self.events[i].data.get(),
        }
    }

    /// How many events record it.
    pub(crate) fn event_count(&self) -> usize {
        self.events.len()
    }

    /// Like every other event's, its events' time is that of the transaction
    /// that writes them, not of the request (which may have queued meanwhile).
    pub(crate) fn set_event_time(&mut self, at: i64) {
        for ev in &mut self.events {
            // Not shared yet: no copy is made.
            Arc::make_mut(ev).at = from_ms(at);
        }
    }

    /// Its `i`th event was written as `seq`.
    pub(crate) fn set_seq(&mut self, i: usize, seq: i64) {
        Arc::make_mut(&mut self.events[i]).seq = seq;
    }
}

/// Appends the inserts of `jobs` to `q` (no `;` after the last): one
/// statement for their actions, one for their events (returning each
/// event's `seq` and id), all with `at` as the time of the transaction that
/// writes them.
pub(crate) fn push_inserts(q: &mut QueryBuilder<Sqlite>, jobs: &mut [&mut CreateJob], at: i64) {
    q.push(format_args!("INSERT INTO actions ({ACTION_COLUMNS}) "));
    q.push_values(jobs.iter(), |mut row, job| {
        for v in job.action_row() {
            v.push(&mut row);
        }
    });
    for job in jobs.iter_mut() {
        job.set_event_time(at);
    }
    q.push(format_args!("; INSERT INTO events ({EVENT_COLUMNS}) "));
    let rows = jobs
        .iter()
        .flat_map(|job| (0..job.event_count()).map(move |i| job.event_row(i, at)));
    q.push_values(rows, |mut row, values| {
        for v in values {
            v.push(&mut row);
        }
    });
    q.push(" RETURNING seq, id");
}

impl CreateJob {
    /// Fills in its events' `seq` from those the insert returned.
    pub(crate) fn written(&mut self, seqs: &HashMap<String, i64>) -> Result<(), StoreError> {
        for ev in &mut self.events {
            Arc::make_mut(ev).seq = seqs
                .get(&ev.id)
                .copied()
                .ok_or_else(|| StoreError::Corrupt(format!("no seq for event {}", ev.id)))?;
        }
        Ok(())
    }
}

impl CreateJob {
    /// Its events, once committed, to publish (shared: the job keeps its
    /// own references, to be dropped on the caller's thread).
    pub(crate) fn events(&self) -> &[Arc<Event>] {
        &self.events
    }

    /// The action it stored, once answered, and its last `action.*` event,
    /// whose data is that action as stored, already rendered (see
    /// `created_events`: every such event carries the action as it stands
    /// then, and the last one as it was stored).
    pub(crate) fn into_action(self) -> (Action, Option<Arc<Event>>) {
        let rendered = self
            .events
            .iter()
            .rev()
            .find(|ev| ev.kind.starts_with("action."))
            .cloned();
        (self.action, rendered)
    }
}

/// Who settled a new action the moment it was asked: the grant that
/// allowed it (`grant:<id>`), else the policy. A receipt names the grant,
/// which a human made, instead of the profile.
pub(crate) fn decided_at_creation(decision: &Decision) -> String {
    let rule = decision.rule.as_ref();
    match (
        rule.and_then(|r| r.get("kind")).and_then(Value::as_str),
        rule.and_then(|r| r.get("id")).and_then(Value::as_str),
    ) {
        (Some("grant"), Some(id)) => format!("grant:{id}"),
        _ => "policy".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_widths_count_the_columns_named() {
        assert_eq!(ACTION_COLUMNS.split(',').count(), ACTION_WIDTH);
        assert_eq!(EVENT_COLUMNS.split(',').count(), EVENT_WIDTH);
    }
}
