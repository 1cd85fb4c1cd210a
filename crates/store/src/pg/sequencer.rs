//! One caller of the sequencing pass per node (see `log`).
//!
//! A writer whose commit queued events hands its `pos` here and waits. One
//! task takes every writer waiting when it is free, runs one pass for all
//! of them (`actiongate_sequence(NULL, node)`: it numbers whatever
//! committed events are queued, theirs included, since each committed
//! before asking), reads their seqs in one query, and publishes all their
//! events on this node in seq order before answering any of them.
//!
//! A pass called by each writer itself queued every writer of the cluster
//! on the sequencer's lock, each in a transaction of its own, for a pass
//! that mostly found its events numbered already: `pg_stat_statements` at
//! 24 connections on one node showed one call per action, two thirds of
//! them waiting for the lock. Here a node makes one call per batch, so at
//! most one caller per node waits for the lock.

use std::collections::HashMap;
use std::sync::Arc;

use actiongate_api::model::Event;
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};

use super::log::Batch;
use super::tail::Tail;
use crate::error::StoreError;

/// What a writer is told: its events, numbered and published.
type Numbered = Result<Vec<Event>, StoreError>;

/// A writer waiting: where its committed events were queued, the events,
/// and where to answer.
type Waiting = (i64, Batch, oneshot::Sender<Numbered>);

/// Writers taken into one pass at most.
const BATCH: usize = 1024;

/// The node's handle on its sequencing task.
#[derive(Debug, Clone)]
pub(crate) struct Sequencer {
    tx: mpsc::UnboundedSender<Waiting>,
}

impl Sequencer {
    /// Starts the task; it ends when the last handle is dropped.
    pub(crate) fn start(pool: PgPool, node: Arc<str>, tail: Arc<Tail>) -> Sequencer {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, node, tail, rx));
        Sequencer { tx }
    }

    /// Numbers `batch`, the committed events queued at `pos`, and publishes
    /// them on this node (with whatever was numbered before them) before
    /// answering them with their seqs.
    pub(crate) async fn number(&self, pos: i64, batch: Batch) -> Numbered {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((pos, batch, reply))
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

async fn run(
    pool: PgPool,
    node: Arc<str>,
    tail: Arc<Tail>,
    mut rx: mpsc::UnboundedReceiver<Waiting>,
) {
    let mut waiting: Vec<Waiting> = Vec::new();
    loop {
        // Writers carried over from the last pass are served without
        // waiting for a new one.
        if waiting.is_empty() {
            if rx.recv_many(&mut waiting, BATCH).await == 0 {
                return;
            }
        } else {
            take_ready(&mut rx, &mut waiting);
        }
        let asked = waiting.len();
        let upto = match super::log::sequence_any(&pool, &node).await {
            Ok(upto) => upto,
            Err(e) => {
                fail(&mut waiting, &e);
                continue;
            }
        };
        // Writers that asked during the pass: it numbered their events if
        // they committed before it began, and publishing them now saves
        // reading them back.
        take_ready(&mut rx, &mut waiting);
        let positions: Vec<i64> = waiting.iter().map(|(pos, _, _)| *pos).collect();
        let firsts = match seqs_of(&pool, &positions).await {
            Ok(firsts) => firsts,
            Err(e) => {
                fail(&mut waiting, &e);
                continue;
            }
        };
        let mut answers: Vec<(Numbered, oneshot::Sender<Numbered>)> = Vec::new();
        let mut carried = Vec::new();
        for (i, (pos, batch, reply)) in waiting.drain(..).enumerate() {
            let numbered = match firsts.get(&pos) {
                Some(first) => Ok(batch.numbered(*first)),
                // Asked during the pass, committed after it began: the
                // next pass numbers them.
                None if i >= asked => {
                    carried.push((pos, batch, reply));
                    continue;
                }
                // A pass after the commit always numbers the commit's
                // events; nothing else removes them from the queue.
                None => Err(StoreError::Conflict(format!(
                    "committed events at pos {pos} were not numbered"
                ))),
            };
            answers.push((numbered, reply));
        }
        waiting = carried;
        // Every writer's events in one go, in seq order: published by
        // writers racing each other, all but the first would find a gap
        // before theirs and read the log back.
        let mut all: Vec<Event> = answers
            .iter()
            .filter_map(|(n, _)| n.as_ref().ok())
            .flatten()
            .cloned()
            .collect();
        all.sort_unstable_by_key(|e| e.seq);
        if let Err(e) = tail.publish(all, upto).await {
            // Committed all the same; the tail's loop publishes them.
            tracing::warn!(error = %e, "publishing committed events failed");
        }
        for (numbered, reply) in answers {
            // The writer may have stopped waiting (its call was cut off).
            let _ = reply.send(numbered);
        }
    }
}

/// Moves the writers waiting now into `waiting`, up to [`BATCH`].
fn take_ready(rx: &mut mpsc::UnboundedReceiver<Waiting>, waiting: &mut Vec<Waiting>) {
    while waiting.len() < BATCH {
        match rx.try_recv() {
            Ok(w) => waiting.push(w),
            Err(_) => return,
        }
    }
}

/// Answers every writer in `waiting` with `e`.
fn fail(waiting: &mut Vec<Waiting>, e: &StoreError) {
    for (_, _, reply) in waiting.drain(..) {
        let _ = reply.send(Err(StoreError::Unavailable(e.to_string())));
    }
}

/// The first seq of each of `positions`' events that are numbered (by
/// the pass just run or an earlier one, so at most its `upto`).
async fn seqs_of(pool: &PgPool, positions: &[i64]) -> Result<HashMap<i64, i64>, StoreError> {
    let rows: Vec<(i64, i64)> = sqlx::query_as("SELECT pos, seq FROM events WHERE pos = ANY($1)")
        .bind(positions)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().collect())
}
