//! The hot write: new actions with nothing to read first (no idempotency
//! key), decision-only or for a handler. The writer inserts every one of
//! them queued in a batch with one statement per table, instead of several
//! round trips to the connection's thread per action (savepoint, action
//! row, each event row, release), and knows the events it wrote without
//! reading them back.

use std::collections::HashMap;

use serde_json::Value;
use sqlx::{QueryBuilder, Sqlite};
use tokio::sync::oneshot;

use crate::actions::{NewAction, claim_of, created_events};
use crate::error::StoreError;
use crate::model::{Action, Event};
use crate::time::{from_ms, now, to_ms};

/// Where the caller of a [`CreateJob`] receives its answer.
pub(crate) type Answer = oneshot::Receiver<Result<(Action, bool), StoreError>>;

/// A new action prepared by its caller (rows built, JSON rendered), waiting
/// in the writer's queue for its answer.
pub(crate) struct CreateJob {
    /// The action as it will be stored and answered.
    pub(crate) action: Action,
    rule: Option<String>,
    request_hash: String,
    /// A handler action's params as sent (the action shows them masked).
    params: Option<String>,
    /// When it is stored claimed for its first attempt, in ms.
    claim_until: Option<i64>,
    /// The events recording it, in order; `seq` is filled in by the insert.
    events: Vec<Event>,
    /// Their data as stored.
    event_data: Vec<String>,
    reply: oneshot::Sender<Result<(Action, bool), StoreError>>,
}

impl CreateJob {
    /// Whether `new` can take this path: nothing must be read before it is
    /// inserted (no idempotency key to look up).
    pub(crate) fn applies(new: &NewAction) -> bool {
        new.idempotency_key.is_none()
    }

    /// Builds the rows of `new` (see [`CreateJob::applies`]) and the
    /// receiver of its answer.
    pub(crate) fn prepare(mut new: NewAction) -> Result<(CreateJob, Answer), StoreError> {
        let created = now();
        let rule = new.decision.rule.as_ref().map(Value::to_string);
        let request_hash = std::mem::take(&mut new.request_hash);
        let claim_until = claim_of(&new).map(to_ms);
        let params = new.handler.as_ref().map(|h| h.params.to_string());
        let mut action = crate::actions::stored_action(new, created);
        let created_events = created_events(&mut action, claim_until.is_some())?;
        let (events, event_data) = created_events
            .into_iter()
            .map(|ev| ev.prepare(created))
            .unzip();
        let (reply, rx) = oneshot::channel();
        Ok((
            CreateJob {
                action,
                rule,
                request_hash,
                params,
                claim_until,
                events,
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

/// Appends the inserts of `jobs` to `q` (no `;` after the last): one
/// statement for their actions, one for their events (returning each event's `seq` and id), all with
/// `at` as the time of the transaction that writes them.
pub(crate) fn push_inserts(q: &mut QueryBuilder<Sqlite>, jobs: &mut [&mut CreateJob], at: i64) {
    q.push(
        "INSERT INTO actions (id, agent, tool, detail, action_string, reason, status, \
         decision_result, decision_reason, decision_rule, created_at, decided_at, decided_by, \
         deadline, settled_at, request_hash, handler, action_name, params, params_view, \
         permission, scope, display, attempts, lease_until) ",
    );
    q.push_values(jobs.iter(), |mut row, job| {
        let a = &job.action;
        let decided = a.decided_at.map(to_ms);
        let json = |v: Option<&Value>| v.map(Value::to_string);
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
            .push_bind(job.request_hash.clone())
            .push_bind(a.handler.clone())
            .push_bind(a.action.clone())
            .push_bind(job.params.clone())
            .push_bind(json(a.params.as_ref()))
            .push_bind(a.permission.clone())
            .push_bind(a.scope.clone().map(|s| Value::Object(s).to_string()))
            .push_bind(json(a.display.as_ref()))
            .push_bind(i64::from(job.claim_until.is_some()))
            .push_bind(job.claim_until);
    });
    // Like every other event's, `at` is the time of the transaction that
    // writes it, not of the request (which may have queued meanwhile).
    for ev in jobs.iter_mut().flat_map(|job| job.events.iter_mut()) {
        ev.at = from_ms(at);
    }
    q.push("; INSERT INTO events (id, type, at, agent, action_id, grant_id, data) ");
    let rows = jobs
        .iter()
        .flat_map(|job| job.events.iter().zip(&job.event_data));
    q.push_values(rows, |mut row, (e, data)| {
        row.push_bind(e.id.clone())
            .push_bind(e.kind.clone())
            .push_bind(at)
            .push_bind(e.agent.clone())
            .push_bind(e.action_id.clone())
            .push_bind(None::<String>)
            .push_bind(data.clone());
    });
    q.push(" RETURNING seq, id");
}

impl CreateJob {
    /// Fills in its events' `seq` from those the insert returned.
    pub(crate) fn written(&mut self, seqs: &HashMap<String, i64>) -> Result<(), StoreError> {
        for ev in &mut self.events {
            ev.seq = seqs
                .get(&ev.id)
                .copied()
                .ok_or_else(|| StoreError::Corrupt(format!("no seq for event {}", ev.id)))?;
        }
        Ok(())
    }
}

impl CreateJob {
    /// Its events, once committed, to publish.
    pub(crate) fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}
