//! Following the event log: what publishes every node's events to this
//! node's waiters and streams, in `seq` order, none skipped.
//!
//! Two paths publish, one at a time (`lock`): a commit of this node
//! publishes its own events before its caller is answered (as on SQLite:
//! whoever hears the answer can find the events already sent), reading the
//! log first when other nodes' events came in between; and the loop
//! ([`run`]) publishes what other nodes commit, woken by a notification or
//! the poll interval.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::{broadcast, oneshot};

use crate::error::StoreError;
use crate::events::{event_columns, from_row};
use crate::grant_cache::GrantCache;
use actiongate_api::model::Event;

/// Events read per query while catching up.
const PAGE: i64 = 1000;

/// What the tail needs.
pub(crate) struct Tail {
    pub(crate) pool: PgPool,
    pub(crate) tx: broadcast::Sender<Arc<Event>>,
    pub(crate) last_seq: Arc<AtomicI64>,
    pub(crate) poll: Duration,
    /// This node's name in the notifications of its commits.
    pub(crate) node: Arc<str>,
    /// Active grants this node read, forgotten at every grant event it
    /// publishes (this node's before its caller is answered, the others'
    /// as soon as they are read).
    pub(crate) grants: Arc<GrantCache>,
    /// Whether the loop listens and its last read of the log succeeded:
    /// what other nodes commit then reaches this node within a
    /// notification's latency, and the grants cache may be used.
    pub(crate) following: AtomicBool,
    /// Where signs of Postgres going away are recorded, for the pool.
    pub(crate) losses: Arc<super::pool::Losses>,
    /// Held while publishing, so events go out once and in order.
    pub(crate) lock: tokio::sync::Mutex<()>,
}

impl Tail {
    /// Publishes `written`, events this node's commits just wrote (in `seq`
    /// order), and every event up to `upto` (numbered by the same
    /// sequencing pass or before it) not yet published: read from the log
    /// only when there are such others (another node's events, numbered
    /// among these or before them).
    pub(crate) async fn publish(&self, written: Vec<Event>, upto: i64) -> Result<(), StoreError> {
        let Some(last) = written.last().map(|e| e.seq) else {
            return Ok(());
        };
        let _held = self.lock.lock().await;
        let after = self.last_seq.load(Ordering::Acquire);
        if last.max(upto) <= after {
            return Ok(());
        }
        // The run of `written` that follows what was published, gapless.
        let mut next = after + 1;
        for ev in written {
            if ev.seq < next {
                continue;
            }
            if ev.seq != next {
                break;
            }
            self.send(ev);
            next += 1;
        }
        if upto < next {
            return Ok(());
        }
        self.catch_up_locked().await
    }

    /// Publishes `ev`, the next event. Hold `lock`.
    fn send(&self, ev: Event) {
        if ev.kind.starts_with("grant.") {
            self.grants.clear();
        }
        self.last_seq.store(ev.seq, Ordering::Release);
        // No receivers is fine: nobody is listening.
        let _ = self.tx.send(Arc::new(ev));
    }

    /// Publishes every committed event after the last one published;
    /// with `sweep`, first numbers any committed events still queued (a
    /// writer's whose own pass failed or never ran: its node died between
    /// its commit and the pass).
    async fn catch_up(&self, sweep: bool) -> Result<(), StoreError> {
        if sweep {
            super::log::sequence_any(&self.pool, &self.node).await?;
        }
        let _held = self.lock.lock().await;
        self.catch_up_locked().await
    }

    async fn catch_up_locked(&self) -> Result<(), StoreError> {
        loop {
            let after = self.last_seq.load(Ordering::Acquire);
            let rows = sqlx::query(concat!(
                "SELECT ",
                event_columns!(),
                " FROM events WHERE seq > $1 ORDER BY seq LIMIT $2"
            ))
            .bind(after)
            .bind(PAGE)
            .fetch_all(&self.pool)
            .await?;
            let n = rows.len();
            for row in &rows {
                self.send(from_row(row)?);
            }
            if i64::try_from(n).unwrap_or(0) < PAGE {
                return Ok(());
            }
        }
    }
}

/// How soon a node tries again to listen after its listening connection
/// broke (Postgres restarted, a network cut), whatever the poll interval.
const RELISTEN: Duration = Duration::from_secs(1);

async fn listen(pool: &PgPool) -> Option<PgListener> {
    let mut listener = PgListener::connect_with(pool).await.ok()?;
    listener.listen(super::log::CHANNEL).await.ok()?;
    Some(listener)
}

/// Whether a notification (`<last seq> <node>`, sent by a sequencing pass,
/// see `log`) tells of nothing to read: events this node numbered (the
/// writer that ran the pass publishes up to its last seq before answering;
/// should that fail, its next commit or the poll reads them) or events
/// already published.
fn nothing_new(payload: &str, node: &str, published: i64) -> bool {
    let mut parts = payload.split(' ');
    let seq = parts.next().and_then(|s| s.parse::<i64>().ok());
    let from = parts.next();
    from == Some(node) || seq.is_some_and(|seq| seq <= published)
}

/// What woke the loop.
enum Woken {
    /// A notification with this payload.
    Notified(String),
    /// The listening connection broke (and may have been made again): what
    /// was notified meanwhile is lost.
    Lost { listening: bool },
}

/// Runs until `stop`: catch up, then wait for a notification or the poll
/// interval, and again. When the listening connection breaks (Postgres
/// restarted), it catches up at once and listens again within
/// [`RELISTEN`], reading the log at least that often meanwhile, so what
/// other nodes commit after the restart keeps arriving. A notification of
/// nothing new ([`nothing_new`]) is no reason to read.
pub(crate) async fn run(tail: Arc<Tail>, mut stop: oneshot::Receiver<()>) {
    let mut listener = tokio::select! {
        _ = &mut stop => return,
        l = listen(&tail.pool) => l,
    };
    let mut failing = false;
    // Whether to number stray queued events first: at the start, at each
    // poll and after a lost connection, not at each notification (whose
    // pass numbered everything committed before it).
    let mut sweep = true;
    loop {
        match tail.catch_up(sweep).await {
            Ok(()) => {
                if failing {
                    tracing::info!("reading the event log again");
                }
                failing = false;
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "reading the event log failed; retrying");
                }
                failing = true;
                tail.losses.lost();
            }
        }
        if listener.is_none() {
            tail.losses.lost();
        }
        let following = listener.is_some() && !failing;
        if !tail.following.swap(following, Ordering::AcqRel) && following {
            // What was cached while not following may miss a change.
            tail.grants.clear();
        }
        let wait = if listener.is_some() {
            tail.poll
        } else {
            tail.poll.min(RELISTEN)
        };
        let poll_at = tokio::time::Instant::now() + wait;
        sweep = true;
        loop {
            let heard = async {
                match listener.as_mut() {
                    Some(l) => match l.try_recv().await {
                        Ok(Some(n)) => Woken::Notified(n.payload().to_owned()),
                        // The connection was lost and made again.
                        Ok(None) => Woken::Lost { listening: true },
                        Err(_) => Woken::Lost { listening: false },
                    },
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut stop => return,
                woken = heard => match woken {
                    Woken::Notified(payload)
                        if nothing_new(&payload, &tail.node, tail.last_seq.load(Ordering::Acquire)) =>
                    {
                        continue;
                    }
                    Woken::Notified(_) => sweep = false,
                    Woken::Lost { listening } => {
                        // Notifications may have been lost: read the log
                        // now, listen again soon if need be.
                        tail.following.store(false, Ordering::Release);
                        tail.losses.lost();
                        if !listening {
                            listener = None;
                        }
                    }
                },
                () = tokio::time::sleep_until(poll_at) => {
                    if listener.is_none() {
                        listener = tokio::select! {
                            _ = &mut stop => return,
                            l = listen(&tail.pool) => l,
                        };
                    }
                }
            }
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::nothing_new;

    #[test]
    fn only_another_nodes_unpublished_events_are_worth_a_read() {
        assert!(nothing_new("7 me", "me", 3), "this node's own commit");
        assert!(nothing_new("7 other", "me", 7), "published already");
        assert!(!nothing_new("8 other", "me", 7));
        // An older daemon's notification (the seq alone), or garbage.
        assert!(!nothing_new("8", "me", 7));
        assert!(nothing_new("7", "me", 7));
        assert!(!nothing_new("", "me", 7));
    }
}
