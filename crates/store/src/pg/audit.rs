//! The audit chain's anchor and retention on Postgres.
//!
//! Every node runs retention. Pruning locks the anchor's row first, so two
//! nodes pruning at once take turns: the second reads the anchor the first
//! moved, and the events after it, only once the first has committed. The
//! anchor's row is made (at the genesis hash) when it is first needed, so
//! there is always a row to lock.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use crate::audit::{Anchor, GENESIS_HASH, PG_EVENTS, chain_rows, due_chunk, due_until};
use crate::error::StoreError;
use crate::pg::Postgres;
use crate::time::to_ms;

/// The anchor's row, made at the genesis hash if missing, locked until the
/// transaction ends: `FOR UPDATE` (pruning, which moves it) or `FOR SHARE`
/// (anchoring, which hashes from it and must not see it move).
pub(crate) async fn lock_anchor(
    conn: &mut PgConnection,
    exclusive: bool,
) -> Result<Anchor, StoreError> {
    sqlx::query(
        "INSERT INTO audit_anchor (id, seq, hash) VALUES (1, 0, $1) ON CONFLICT DO NOTHING",
    )
    .bind(GENESIS_HASH)
    .execute(&mut *conn)
    .await?;
    let sql = if exclusive {
        "SELECT seq, hash FROM audit_anchor WHERE id = 1 FOR UPDATE"
    } else {
        "SELECT seq, hash FROM audit_anchor WHERE id = 1 FOR SHARE"
    };
    let (seq, hash): (i64, String) = sqlx::query_as(sql).fetch_one(&mut *conn).await?;
    Ok(Anchor { seq, hash })
}

impl Postgres {
    /// Where the chain of the stored events starts.
    pub async fn audit_anchor(&self) -> Result<Anchor, StoreError> {
        let row: Option<(i64, String)> =
            sqlx::query_as("SELECT seq, hash FROM audit_anchor WHERE id = 1")
                .fetch_optional(&self.pool)
                .await?;
        Ok(row
            .map(|(seq, hash)| Anchor { seq, hash })
            .unwrap_or_default())
    }

    /// The seq of the first event (in seq order) at or after `at`.
    pub async fn first_seq_since(&self, at: DateTime<Utc>) -> Result<Option<i64>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT MIN(seq) FROM events WHERE at >= $1")
                .bind(to_ms(at))
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// Deletes up to `max` of the oldest events written before `cutoff`
    /// (never one a subscription has not yet turned into deliveries) and
    /// moves the anchor past them. Returns how many events were pruned.
    /// Deliveries are records: `records.retention` deletes them, with
    /// their attempts.
    pub async fn prune_events(&self, cutoff: DateTime<Utc>, max: i64) -> Result<usize, StoreError> {
        let mut tx = self.begin().await?;
        let Anchor { mut seq, mut hash } = lock_anchor(&mut tx, true).await?;
        // Cursors only move forward: one read a moment ago holds back at
        // least as much as the current one.
        let keep_after: Option<i64> = sqlx::query_scalar("SELECT MIN(cursor) FROM subscriptions")
            .fetch_one(&mut *tx)
            .await?;
        let heads: Vec<(i64, i64)> =
            sqlx::query_as("SELECT seq, at FROM events WHERE seq > $1 ORDER BY seq LIMIT $2")
                .bind(seq)
                .bind(max)
                .fetch_all(&mut *tx)
                .await?;
        let mut pruned = 0;
        if let Some(upper) = due_until(&heads, to_ms(cutoff), keep_after) {
            while seq < upper {
                let rows = due_chunk::<sqlx::Postgres>(PG_EVENTS, seq, upper)
                    .build()
                    .fetch_all(&mut *tx)
                    .await?;
                if rows.is_empty() {
                    break;
                }
                pruned += chain_rows(&rows, &mut seq, &mut hash)?;
            }
        }
        if pruned > 0 {
            sqlx::query("DELETE FROM events WHERE seq <= $1")
                .bind(seq)
                .execute(&mut *tx)
                .await?;
            sqlx::query("UPDATE audit_anchor SET seq = $1, hash = $2 WHERE id = 1")
                .bind(seq)
                .bind(&hash)
                .execute(&mut *tx)
                .await?;
        }
        self.commit(tx, Vec::new()).await?;
        Ok(pruned)
    }
}
