//! The pool of connections to Postgres, and when a connection is tested
//! before it is used.
//!
//! sqlx tests every connection as it goes back to the pool (a round trip,
//! off the request's path), and by default again as it is taken out (a
//! round trip on every request's path). A connection that was fine a moment
//! ago is fine now unless Postgres went away meanwhile, which the tail
//! notices at once (its listening connection breaks, its reads fail) and
//! records ([`Losses::lost`]). So a connection is tested when taken out
//! only if it sat idle for a while or was made before the last loss; any
//! other is used as is.
//!
//! Every new connection gets TCP keepalive and a user timeout
//! ([`keepalive`]), so the waits sqlx does not bound end when the network
//! silently goes away.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::error::StoreError;
use crate::pg::{PgOptions, keepalive};

/// A connection idle this long is tested before use.
const IDLE: Duration = Duration::from_secs(1);

/// For this long after a loss, connections made before it are tested before
/// use (one idle longer is tested anyway).
const AFTER_LOSS: Duration = Duration::from_secs(60);

/// When this node last saw Postgres go away.
pub(crate) struct Losses {
    start: Instant,
    /// Milliseconds after `start` of the last loss, plus one; 0: none yet.
    last: AtomicU64,
}

impl Losses {
    fn new() -> Losses {
        Losses {
            start: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    /// Postgres went away (or a connection to it broke): connections made
    /// before now are tested before their next use.
    pub(crate) fn lost(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms.saturating_add(1), Ordering::Release);
    }

    /// How long ago the last loss was, if there was one.
    fn since_last(&self) -> Option<Duration> {
        let last = self.last.load(Ordering::Acquire).checked_sub(1)?;
        Some(
            self.start
                .elapsed()
                .saturating_sub(Duration::from_millis(last)),
        )
    }
}

/// Whether a connection made `age` ago and idle for `idle` is tested
/// before use, the last loss `since_loss` ago.
fn needs_test(age: Duration, idle: Duration, since_loss: Option<Duration>) -> bool {
    idle >= IDLE || since_loss.is_some_and(|since| since < AFTER_LOSS && age >= since)
}

/// Connects the pool `pg` describes, with `connect`'s options.
pub(crate) async fn connect(
    pg: &PgOptions,
    connect: PgConnectOptions,
) -> Result<(PgPool, Arc<Losses>), StoreError> {
    let losses = Arc::new(Losses::new());
    let seen = losses.clone();
    let user_timeout = keepalive::user_timeout(pg.connect_timeout + pg.statement_timeout);
    let pool = PgPoolOptions::new()
        .max_connections(pg.max_connections.max(2))
        .min_connections(1)
        .acquire_timeout(pg.connect_timeout)
        .test_before_acquire(false)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                keepalive::arm(conn, user_timeout).await;
                Ok(())
            })
        })
        .before_acquire(move |conn, meta| {
            let test = needs_test(meta.age, meta.idle_for, seen.since_last());
            Box::pin(async move {
                if test {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
        .connect_with(connect)
        .await?;
    Ok((pool, losses))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test(age_ms: u64, idle_ms: u64, since_loss: Option<Duration>) -> bool {
        needs_test(
            Duration::from_millis(age_ms),
            Duration::from_millis(idle_ms),
            since_loss,
        )
    }

    #[test]
    fn a_connection_is_tested_after_idling_or_when_older_than_a_loss() {
        // In steady use: not tested.
        assert!(!test(60_000, 5, None));
        // Idle a while: tested.
        assert!(test(60_000, 1_500, None));
        // Made before a loss 2 s ago: tested; made since: not.
        let since = Some(Duration::from_secs(2));
        assert!(test(3_000, 5, since));
        assert!(!test(1_000, 5, since));
        // Long after the loss, only idling counts.
        assert!(!test(600_000, 5, Some(AFTER_LOSS)));
    }

    #[test]
    fn losses_are_remembered_from_when_they_happen() {
        let l = Losses::new();
        assert_eq!(l.since_last(), None);
        l.lost();
        assert!(l.since_last().is_some_and(|d| d < Duration::from_secs(1)));
    }
}
