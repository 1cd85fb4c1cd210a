//! The other hot write: an executor's answer that settles its action. The
//! dispatcher holds the action as it claimed it, so the settled action and
//! its event are built in memory, and the writer runs the compare-and-set
//! and the event insert for every settle queued in a batch in one hand-off
//! to the connection's thread, instead of a transaction of its own per
//! answer (begin, update, event, commit, reading the event back).

use sqlx::{QueryBuilder, Sqlite};
use tokio::sync::oneshot;

use crate::actions::event_for;
use crate::dispatch::{ActionAttempt, status_event};
use crate::error::StoreError;
use crate::time::{from_ms, now};
use actiongate_api::model::{Action, Event, Outcome};

/// Where the caller of a [`SettleJob`] receives its answer: the settled
/// action, or `None` when the attempt was superseded (lease lapsed, result
/// already in, cancelled).
pub(crate) type Answer = oneshot::Receiver<Result<Option<Action>, StoreError>>;

/// A settle prepared by its caller, waiting in the writer's queue.
pub(crate) struct SettleJob {
    /// The action as it will be once settled.
    action: Action,
    /// The attempt that settles it.
    attempt: i64,
    outcome: String,
    record: String,
    /// The event recording it; `seq` is filled in when written.
    event: Event,
    /// Whether the compare-and-set applied (known once written).
    applied: bool,
    reply: oneshot::Sender<Result<Option<Action>, StoreError>>,
}

impl SettleJob {
    /// Settles `running`, claimed for attempt `rec.n`, with `outcome`.
    pub(crate) fn prepare(
        running: &Action,
        rec: &ActionAttempt,
        outcome: Outcome,
    ) -> Result<(SettleJob, Answer), StoreError> {
        let mut action = running.clone();
        action.status = outcome.status;
        action.attempts.push(rec.clone());
        let outcome_text = serde_json::to_string(&outcome)?;
        action.outcome = Some(outcome);
        let event = event_for(&action, status_event(action.status))?.prepare(now());
        let (reply, rx) = oneshot::channel();
        Ok((
            SettleJob {
                action,
                attempt: rec.n,
                outcome: outcome_text,
                record: serde_json::to_string(rec)?,
                event,
                applied: false,
                reply,
            },
            rx,
        ))
    }

    /// Appends its two statements to `q` (no `;` after the last): the compare-and-set (only while
    /// attempt `n` is the running one) and its event, written only when
    /// the update changed the row and returning the event's `seq`.
    pub(crate) fn push_sql(&mut self, q: &mut QueryBuilder<Sqlite>, at: i64) {
        self.event.at = from_ms(at);
        q.push("UPDATE actions SET status = ")
            .push_bind(self.action.status.as_str())
            .push(", outcome = ")
            .push_bind(self.outcome.clone())
            .push(", settled_at = ")
            .push_bind(at)
            .push(
                ", lease_until = NULL, next_attempt_at = NULL, \
                 attempt_log = json_insert(COALESCE(attempt_log, '[]'), '$[#]', json(",
            )
            .push_bind(self.record.clone())
            .push(")) WHERE id = ")
            .push_bind(self.action.id.clone())
            .push(" AND status = 'running' AND attempts = ")
            .push_bind(self.attempt)
            .push("; INSERT INTO events (id, type, at, agent, action_id, grant_id, data) SELECT ")
            .push_bind(self.event.id.clone())
            .push(", ")
            .push_bind(self.event.kind.clone())
            .push(", ")
            .push_bind(at)
            .push(", ")
            .push_bind(self.event.agent.clone())
            .push(", ")
            .push_bind(self.event.action_id.clone())
            .push(", NULL, ")
            .push_bind(self.event.data.get().to_owned())
            .push(" WHERE changes() = 1 RETURNING seq, id");
    }

    /// The event's id, to match the `seq` returned for it.
    pub(crate) fn event_id(&self) -> &str {
        &self.event.id
    }

    /// Records the `seq` its event got: the update applied.
    pub(crate) fn written(&mut self, seq: i64) {
        self.event.seq = seq;
        self.applied = true;
    }

    /// Its event, once committed, to publish (none when superseded).
    pub(crate) fn take_event(&mut self) -> Option<Event> {
        self.applied.then(|| {
            let at = self.event.at;
            std::mem::replace(&mut self.event, placeholder(at))
        })
    }

    /// Answers the caller.
    pub(crate) fn answer(self, result: Result<(), StoreError>) {
        let answer = result.map(|()| self.applied.then_some(self.action));
        // The caller may have gone away; the change stands either way.
        let _ = self.reply.send(answer);
    }
}

fn placeholder(at: chrono::DateTime<chrono::Utc>) -> Event {
    Event {
        seq: 0,
        id: String::new(),
        kind: String::new(),
        at,
        agent: None,
        action_id: None,
        grant_id: None,
        data: actiongate_api::model::Json::null(),
    }
}
