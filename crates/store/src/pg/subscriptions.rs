//! Notification subscriptions and their outbox on Postgres.
//!
//! What SQLite gets from its single writer, Postgres gets from locks:
//! - fan-out locks every subscription row (in id order) before reading the
//!   cursors, so nodes fanning out at once take turns and the second finds
//!   the cursors the first moved; `ON CONFLICT DO NOTHING` on
//!   (subscription, event) backs that up;
//! - a node takes due deliveries with `FOR UPDATE SKIP LOCKED` and marks
//!   them with its node id and a lease, so no other node sends them while
//!   it does; the node that holds them still sees them as due (as SQLite's
//!   single sender does: it keeps its own list of what is in flight), so
//!   taking more than it starts now delays nothing;
//! - recording an attempt locks the delivery's row; a finished delivery
//!   stays finished, and a node whose lease lapsed (another node took the
//!   delivery) records its attempt without moving the other's schedule.

use chrono::{DateTime, Utc};

use crate::error::StoreError;
use crate::event_types::TypeFilter;
use crate::events::{event_columns, from_row as event_from_row};
use crate::pg::Postgres;
use crate::row::Cols;
use crate::subscriptions::{
    AttemptOutcome, AttemptRecord, DueDelivery, NewSubscription, delivery_columns,
    delivery_from_row, subscription_columns, subscription_from_row,
};
use crate::time::{from_ms, now, to_ms};
use actiongate_api::{Delivery, DeliveryAttempt, DeliveryStatus, Subscription};

/// When a pending row is due for this node: when it is scheduled, or when
/// another node's claim on it lapses. `$1` is now, `$2` this node.
macro_rules! due_for_me {
    () => {
        "CASE WHEN claim_until > $1 AND claimed_by <> $2 \
         THEN GREATEST(claim_until, next_attempt_at) ELSE next_attempt_at END"
    };
}
pub(crate) use due_for_me;

impl Postgres {
    /// Stores a subscription; it receives events committed from now on.
    pub async fn create_subscription(
        &self,
        new: NewSubscription,
    ) -> Result<Subscription, StoreError> {
        let created = now();
        // The counter is the newest committed seq (pruned or not); events
        // of transactions still open get higher seqs and are delivered.
        sqlx::query(
            "INSERT INTO subscriptions (id, url, types, description, secret, cursor, created_at, tier) \
             SELECT $1, $2, $3, $4, $5, seq, $6, $7 FROM event_counter WHERE id = 1",
        )
        .bind(&new.id)
        .bind(&new.url)
        .bind(serde_json::to_string(&new.types)?)
        .bind(&new.description)
        .bind(&new.secret)
        .bind(to_ms(created))
        .bind(i64::from(new.tier))
        .execute(&self.pool)
        .await?;
        Ok(Subscription {
            tier: new.tier,
            id: new.id,
            url: new.url,
            types: new.types,
            description: new.description,
            created_at: created,
        })
    }

    /// Every subscription, oldest first.
    pub async fn list_subscriptions(&self) -> Result<Vec<Subscription>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            subscription_columns!(),
            " FROM subscriptions ORDER BY created_at, id"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(subscription_from_row).collect()
    }

    /// One subscription.
    pub async fn get_subscription(&self, id: &str) -> Result<Subscription, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            subscription_columns!(),
            " FROM subscriptions WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref()
            .map(subscription_from_row)
            .transpose()?
            .ok_or(StoreError::NotFound)
    }

    /// Deletes a subscription with its deliveries.
    pub async fn delete_subscription(&self, id: &str) -> Result<(), StoreError> {
        let done = sqlx::query("DELETE FROM subscriptions WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// Turns up to `limit` events past the subscriptions' cursors into
    /// deliveries and moves the cursors, in one transaction. Returns how
    /// many deliveries were created and whether more events wait.
    pub async fn fan_out(&self, limit: i64) -> Result<(usize, bool), StoreError> {
        let mut tx = self.begin().await?;
        let subs: Vec<(String, String, i64, i64)> = sqlx::query_as(
            "SELECT id, types, cursor, tier FROM subscriptions ORDER BY id FOR UPDATE",
        )
        .fetch_all(&mut *tx)
        .await?;
        let Some(min_cursor) = subs.iter().map(|s| s.2).min() else {
            return Ok((0, false));
        };
        let rows = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE seq > $1 ORDER BY seq LIMIT $2"
        ))
        .bind(min_cursor)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        let events = rows
            .iter()
            .map(event_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let Some(last) = events.last().map(|e| e.seq) else {
            return Ok((0, false));
        };
        let mut ids = Vec::new();
        let mut sub_ids: Vec<&str> = Vec::new();
        let mut seqs = Vec::new();
        let mut event_ids: Vec<&str> = Vec::new();
        let mut kinds: Vec<&str> = Vec::new();
        let mut payloads = Vec::new();
        let mut moved = Vec::new();
        for (sub_id, types, cursor, tier) in &subs {
            let types: Vec<String> = serde_json::from_str(types)?;
            // A stored filter was validated when created; one that no
            // longer parses sends nothing rather than all.
            let filter = TypeFilter::parse(&types).ok();
            for ev in events.iter().filter(|e| e.seq > *cursor) {
                if !filter.as_ref().is_some_and(|f| f.matches(&ev.kind))
                    || !crate::subscriptions::tier_lets(*tier, &ev.kind)
                {
                    continue;
                }
                ids.push(uuid::Uuid::now_v7().to_string());
                sub_ids.push(sub_id);
                seqs.push(ev.seq);
                event_ids.push(&ev.id);
                kinds.push(&ev.kind);
                payloads.push(serde_json::to_string(ev)?);
            }
            if last > *cursor {
                moved.push(sub_id.as_str());
            }
        }
        let created = to_ms(now());
        let made = sqlx::query(
            "INSERT INTO deliveries (id, subscription_id, event_seq, event_id, event_type, payload, \
             status, attempts, next_attempt_at, created_at) \
             SELECT i, s, q, e, t, p, 'pending', 0, $7, $7 FROM UNNEST($1::TEXT[], $2::TEXT[], \
             $3::BIGINT[], $4::TEXT[], $5::TEXT[], $6::TEXT[]) AS d(i, s, q, e, t, p) \
             ON CONFLICT (subscription_id, event_seq) DO NOTHING",
        )
        .bind(&ids)
        .bind(&sub_ids)
        .bind(&seqs)
        .bind(&event_ids)
        .bind(&kinds)
        .bind(&payloads)
        .bind(created)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        sqlx::query("UPDATE subscriptions SET cursor = $1 WHERE id = ANY($2)")
            .bind(last)
            .bind(&moved)
            .execute(&mut *tx)
            .await?;
        self.commit(tx, Vec::new()).await?;
        let made = usize::try_from(made).unwrap_or(usize::MAX);
        Ok((
            made,
            i64::try_from(events.len()).unwrap_or(i64::MAX) >= limit,
        ))
    }

    /// Pending deliveries due at `at`, earliest first, taken by this node
    /// (no other node sends them until they are recorded or the lease
    /// lapses); the ones it already holds come again.
    pub async fn due_deliveries(
        &self,
        at: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<DueDelivery>, StoreError> {
        let now_ms = to_ms(at);
        let rows = sqlx::query(
            "WITH due AS (SELECT id, next_attempt_at AS due_at, event_seq FROM deliveries \
             WHERE status = 'pending' AND next_attempt_at <= $1 \
             AND (claim_until IS NULL OR claim_until <= $1 OR claimed_by = $2) \
             ORDER BY next_attempt_at, event_seq LIMIT $3 FOR UPDATE SKIP LOCKED) \
             UPDATE deliveries d SET claimed_by = $2, claim_until = $4 \
             FROM due, subscriptions s WHERE d.id = due.id AND s.id = d.subscription_id \
             RETURNING d.id, d.subscription_id, s.url, s.secret, d.event_id, d.payload, \
             d.attempts, d.created_at, due.due_at, due.event_seq",
        )
        .bind(now_ms)
        .bind(&*self.node)
        .bind(limit)
        .bind(to_ms(at + self.delivery_lease))
        .fetch_all(&self.pool)
        .await?;
        let mut due = rows
            .iter()
            .map(|r| {
                let d = DueDelivery {
                    id: r.try_get("id")?,
                    subscription_id: r.try_get("subscription_id")?,
                    url: r.try_get("url")?,
                    secret: r.try_get("secret")?,
                    event_id: r.try_get("event_id")?,
                    payload: r.try_get("payload")?,
                    attempts: r.try_get("attempts")?,
                    created_at: from_ms(r.try_get("created_at")?),
                };
                let order: (i64, i64) = (r.try_get("due_at")?, r.try_get("event_seq")?);
                Ok((order, d))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        due.sort_by_key(|(order, _)| *order);
        Ok(due.into_iter().map(|(_, d)| d).collect())
    }

    /// Whether some subscription has not yet seen the newest event.
    pub async fn outbox_behind(&self) -> Result<bool, StoreError> {
        // Subscriptions made on other nodes count: no local shortcut.
        Ok(
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM subscriptions WHERE cursor < $1)")
                .bind(self.last_seq())
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// The `limit` earliest pending deliveries and when each is due for
    /// this node.
    pub async fn pending_schedule(
        &self,
        limit: i64,
    ) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
        let rows: Vec<(String, i64)> = sqlx::query_as(concat!(
            "SELECT id, ",
            due_for_me!(),
            " AS due FROM deliveries WHERE status = 'pending' ORDER BY due LIMIT $3"
        ))
        .bind(to_ms(now()))
        .bind(&*self.node)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(id, at)| (id, from_ms(at))).collect())
    }

    /// When the next pending delivery is due for this node.
    pub async fn next_delivery_due(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let ms: Option<i64> = sqlx::query_scalar(concat!(
            "SELECT MIN(",
            due_for_me!(),
            ") FROM deliveries WHERE status = 'pending'"
        ))
        .bind(to_ms(now()))
        .bind(&*self.node)
        .fetch_one(&self.pool)
        .await?;
        Ok(ms.map(from_ms))
    }

    /// Records an attempt and what follows from it.
    pub async fn record_attempt(&self, id: &str, rec: AttemptRecord) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        let row: Option<(i64, String, Option<String>)> = sqlx::query_as(
            "SELECT attempts, status, claimed_by FROM deliveries WHERE id = $1 FOR UPDATE",
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        // Deleted with its subscription meanwhile: nothing to record.
        let Some((attempts, status, claimed_by)) = row else {
            return Ok(());
        };
        let attempt = attempts + 1;
        sqlx::query(
            "INSERT INTO delivery_attempts (delivery_id, attempt, at, status_code, error, duration_ms) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(id)
        .bind(attempt)
        .bind(to_ms(rec.at))
        .bind(rec.status_code.map(i64::from))
        .bind(&rec.error)
        .bind(rec.duration_ms)
        .execute(&mut *tx)
        .await?;
        let taken_over = claimed_by.is_some_and(|c| *c != *self.node);
        let decides =
            status == "pending" && !(taken_over && matches!(rec.outcome, AttemptOutcome::Retry(_)));
        if decides {
            let finished = to_ms(now());
            let (status, next, finished) = match rec.outcome {
                AttemptOutcome::Delivered => ("delivered", None, Some(finished)),
                AttemptOutcome::Retry(at) => ("pending", Some(to_ms(at)), None),
                AttemptOutcome::Failed => ("failed", None, Some(finished)),
            };
            sqlx::query(
                "UPDATE deliveries SET attempts = $1, status = $2, next_attempt_at = $3, \
                 finished_at = $4, last_error = COALESCE($5, last_error), claimed_by = NULL, \
                 claim_until = NULL WHERE id = $6",
            )
            .bind(attempt)
            .bind(status)
            .bind(next)
            .bind(finished)
            .bind(&rec.error)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        } else {
            sqlx::query(
                "UPDATE deliveries SET attempts = $1, last_error = COALESCE($2, last_error) \
                 WHERE id = $3",
            )
            .bind(attempt)
            .bind(&rec.error)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        self.commit(tx, Vec::new()).await?;
        Ok(())
    }

    /// A page of a subscription's deliveries, newest event first, each with
    /// its attempts; `before` is the `event_seq` the previous page ended at.
    pub async fn list_deliveries(
        &self,
        subscription_id: &str,
        status: Option<DeliveryStatus>,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<Delivery>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            delivery_columns!(),
            " FROM deliveries WHERE subscription_id = $1 \
             AND ($2::TEXT IS NULL OR status = $2) AND ($3::BIGINT IS NULL OR event_seq < $3) \
             ORDER BY event_seq DESC LIMIT $4"
        ))
        .bind(subscription_id)
        .bind(status.map(DeliveryStatus::as_str))
        .bind(before)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut out = rows
            .iter()
            .map(delivery_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let ids: Vec<&str> = out.iter().map(|d| d.id.as_str()).collect();
        let attempts = sqlx::query(
            "SELECT delivery_id, attempt, at, status_code, error, duration_ms \
             FROM delivery_attempts WHERE delivery_id = ANY($1) ORDER BY delivery_id, attempt",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        let mut by_delivery: std::collections::HashMap<String, Vec<DeliveryAttempt>> =
            std::collections::HashMap::new();
        for r in &attempts {
            by_delivery
                .entry(r.try_get("delivery_id")?)
                .or_default()
                .push(DeliveryAttempt {
                    attempt: r.try_get("attempt")?,
                    at: from_ms(r.try_get("at")?),
                    status_code: r.try_get("status_code")?,
                    error: r.try_get("error")?,
                    duration_ms: r.try_get("duration_ms")?,
                });
        }
        for d in &mut out {
            d.attempt_log = by_delivery.remove(&d.id).unwrap_or_default();
        }
        Ok(out)
    }
}
