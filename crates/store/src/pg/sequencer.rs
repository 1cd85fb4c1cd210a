//! One caller of the sequencing pass per node (see `log`).
//!
//! A writer whose commit queued events hands its `pos` here and waits. One
//! task takes every writer waiting when it is free, runs one pass for all
//! of them (`actiongate_sequence(NULL, node)`: it numbers whatever
//! committed events are queued, theirs included, since each committed
//! before asking) and reads their seqs in one query.
//!
//! A pass called by each writer itself queued every writer of the cluster
//! on the sequencer's lock, each in a transaction of its own, for a pass
//! that mostly found its events numbered already: `pg_stat_statements` at
//! 24 connections on one node showed one call per action, two thirds of
//! them waiting for the lock. Here a node makes one call per batch, so at
//! most one caller per node waits for the lock.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};

use crate::error::StoreError;

/// What a writer is told: the seq of its first event and the newest seq.
type Numbered = Result<(i64, i64), StoreError>;

/// Writers taken into one pass at most.
const BATCH: usize = 1024;

/// The node's handle on its sequencing task.
#[derive(Debug, Clone)]
pub(crate) struct Sequencer {
    tx: mpsc::UnboundedSender<(i64, oneshot::Sender<Numbered>)>,
}

impl Sequencer {
    /// Starts the task; it ends when the last handle is dropped.
    pub(crate) fn start(pool: PgPool, node: Arc<str>) -> Sequencer {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, node, rx));
        Sequencer { tx }
    }

    /// Numbers the committed events queued at `pos`: answers the seq of
    /// the first of them and the newest seq, which may be higher (events
    /// numbered in the same pass).
    pub(crate) async fn number(&self, pos: i64) -> Numbered {
        let (reply, answer) = oneshot::channel();
        self.tx.send((pos, reply)).map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

async fn run(
    pool: PgPool,
    node: Arc<str>,
    mut rx: mpsc::UnboundedReceiver<(i64, oneshot::Sender<Numbered>)>,
) {
    let mut waiting = Vec::new();
    while rx.recv_many(&mut waiting, BATCH).await > 0 {
        let positions: Vec<i64> = waiting.iter().map(|(pos, _)| *pos).collect();
        let result = pass(&pool, &node, &positions).await;
        for (pos, reply) in waiting.drain(..) {
            let answer = match &result {
                Ok((upto, firsts)) => firsts.get(&pos).map(|first| (*first, *upto)).ok_or_else(
                    // A pass after the commit always numbers the commit's
                    // events; nothing else removes them from the queue.
                    || {
                        StoreError::Conflict(format!(
                            "committed events at pos {pos} were not numbered"
                        ))
                    },
                ),
                Err(e) => Err(StoreError::Unavailable(e.to_string())),
            };
            // The writer may have stopped waiting (its call was cut off).
            let _ = reply.send(answer);
        }
    }
}

/// One pass, then the first seq of each of `positions`' events.
async fn pass(
    pool: &PgPool,
    node: &str,
    positions: &[i64],
) -> Result<(i64, HashMap<i64, i64>), StoreError> {
    let upto = super::log::sequence_any(pool, node).await?;
    let rows: Vec<(i64, i64)> = sqlx::query_as("SELECT pos, seq FROM events WHERE pos = ANY($1)")
        .bind(positions)
        .fetch_all(pool)
        .await?;
    // Numbered by this pass or an earlier one, so at most `upto`.
    Ok((upto, rows.into_iter().collect()))
}
