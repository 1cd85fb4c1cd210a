//! Writes prepared by their callers ([`CreateJob`], [`SettleJob`]): the
//! writer runs a whole run of them in one hand-off to the connection's
//! thread and knows their events without reading the log back.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection};

use crate::create::{CreateJob, push_inserts};
use crate::error::StoreError;
use crate::settle::SettleJob;
use crate::time::{now, to_ms};
use actiongate_api::model::Event;

/// A prepared write waiting in the writer's queue.
pub(crate) enum Quick {
    /// A new action and its events.
    Create(Box<CreateJob>),
    /// An executor's answer settling its action.
    Settle(Box<SettleJob>),
}

impl Quick {
    /// Answers the caller once the commit is known.
    pub(crate) fn answer(self, result: Result<(), StoreError>) {
        match self {
            Quick::Create(job) => job.answer(result),
            Quick::Settle(job) => job.answer(result),
        }
    }

    /// The events it wrote, once committed, to publish.
    pub(crate) fn take_events(&mut self) -> Vec<Arc<Event>> {
        match self {
            Quick::Create(job) => job.events().to_vec(),
            Quick::Settle(job) => job.take_event().map(Arc::new).into_iter().collect(),
        }
    }
}

/// What the statements of a group are wrapped in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wrap {
    /// Nothing: the caller's transaction holds only this group.
    Bare,
    /// Savepoint `grp`, inside the caller's transaction.
    Savepoint,
    /// A transaction of their own, committed in the same hand-off.
    Transaction,
}

/// Writes `group` in one hand-off to the connection's thread, wrapped as
/// `wrap` says, and fills in the `seq` of the events written. All or
/// nothing: on an error the caller rolls back to the savepoint (or the
/// transaction).
pub(crate) async fn write_group_on(
    conn: &mut SqliteConnection,
    group: &mut [Quick],
    wrap: Wrap,
) -> Result<(), StoreError> {
    let mut q: QueryBuilder<Sqlite> = QueryBuilder::new(match wrap {
        Wrap::Bare => "",
        Wrap::Savepoint => "SAVEPOINT grp; ",
        Wrap::Transaction => "BEGIN IMMEDIATE; ",
    });
    let at = to_ms(now());
    let mut creates: Vec<&mut CreateJob> = Vec::new();
    let mut settles: Vec<&mut SettleJob> = Vec::new();
    for item in group.iter_mut() {
        match item {
            Quick::Create(job) => creates.push(job),
            Quick::Settle(job) => settles.push(job),
        }
    }
    let mut more = false;
    if !creates.is_empty() {
        push_inserts(&mut q, &mut creates, at);
        more = true;
    }
    for job in &mut settles {
        if more {
            q.push("; ");
        }
        job.push_sql(&mut q, at);
        more = true;
    }
    match wrap {
        Wrap::Bare => {}
        Wrap::Savepoint => {
            q.push("; RELEASE grp");
        }
        Wrap::Transaction => {
            q.push("; COMMIT");
        }
    }
    // The text differs with the group's make-up: not worth a cache slot each.
    let rows = q.build().persistent(false).fetch_all(&mut *conn).await?;
    let mut seqs: HashMap<String, i64> = HashMap::with_capacity(rows.len());
    for row in &rows {
        seqs.insert(row.try_get("id")?, row.try_get("seq")?);
    }
    for job in creates {
        job.written(&seqs)?;
    }
    for job in settles {
        // No event: the compare-and-set found the attempt superseded.
        if let Some(&seq) = seqs.get(job.event_id()) {
            job.written(seq);
        }
    }
    Ok(())
}
