//! Outbound notification subscriptions and their durable outbox.
//!
//! Each subscription has a cursor: the highest event seq already turned into
//! delivery rows. [`Store::fan_out`] moves every cursor forward in one
//! transaction with the deliveries it creates, so a crash never loses or
//! duplicates one. Deliveries stay `pending` until an attempt succeeds or
//! the sender gives up; every attempt is recorded.

use std::sync::atomic::Ordering;

use chrono::{DateTime, Utc};
use sqlx::Row;

use crate::SqliteStore;
use crate::error::StoreError;
use crate::event_types::TypeFilter;
use crate::events::{from_row as event_from_row, stored_columns, stored_from};
use crate::time::{from_ms, now, opt_from_ms, to_ms};

/// A subscription about to be stored.
#[derive(Debug, Clone)]
pub struct NewSubscription {
    /// Its id.
    pub id: String,
    /// Where events are POSTed.
    pub url: String,
    /// Type filters (validated with [`TypeFilter::parse`]).
    pub types: Vec<String>,
    /// What it is for.
    pub description: Option<String>,
    /// The signing secret, `whsec_…`.
    pub secret: String,
    /// 1: every matching event; 2: only `action.escalated` ([`tier_lets`]).
    pub tier: u8,
}

/// The event type tier-2 subscriptions are sent.
pub const ESCALATED: &str = "action.escalated";

/// Whether a subscription of `tier` is sent an event of type `kind` (that
/// its types match): tier 2 only escalations.
pub fn tier_lets(tier: i64, kind: &str) -> bool {
    tier < 2 || kind == ESCALATED
}

pub use actiongate_api::{Delivery, DeliveryAttempt, DeliveryStatus, Subscription};

/// A stored delivery status.
fn parse_status(s: &str) -> Result<DeliveryStatus, StoreError> {
    s.parse().map_err(StoreError::Corrupt)
}

/// A delivery due now, with what is needed to send it.
#[derive(Debug, Clone)]
pub struct DueDelivery {
    /// The delivery's id.
    pub id: String,
    /// Its subscription.
    pub subscription_id: String,
    /// Where to POST.
    pub url: String,
    /// The signing secret.
    pub secret: String,
    /// `webhook-id`.
    pub event_id: String,
    /// The body.
    pub payload: String,
    /// Attempts before this one.
    pub attempts: i64,
    /// When it entered the outbox.
    pub created_at: DateTime<Utc>,
}

/// What an attempt ended in.
#[derive(Debug, Clone)]
pub enum AttemptOutcome {
    /// Accepted (2xx).
    Delivered,
    /// Try again at this time.
    Retry(DateTime<Utc>),
    /// Give up.
    Failed,
}

/// The record of an attempt to store.
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    /// When it started.
    pub at: DateTime<Utc>,
    /// The receiver's HTTP status, when it answered.
    pub status_code: Option<u16>,
    /// Why it failed.
    pub error: Option<String>,
    /// How long it took.
    pub duration_ms: i64,
    /// What happens next.
    pub outcome: AttemptOutcome,
}

pub(crate) fn subscription_from_row(
    row: &impl crate::row::Cols,
) -> Result<Subscription, StoreError> {
    let types: String = row.try_get("types")?;
    let tier: i64 = row.try_get("tier")?;
    Ok(Subscription {
        tier: u8::try_from(tier).map_err(|_| StoreError::Corrupt(format!("tier {tier}")))?,
        id: row.try_get("id")?,
        url: row.try_get("url")?,
        types: serde_json::from_str(&types)?,
        description: row.try_get("description")?,
        created_at: from_ms(row.try_get("created_at")?),
    })
}

pub(crate) fn delivery_from_row(row: &impl crate::row::Cols) -> Result<Delivery, StoreError> {
    let status: String = row.try_get("status")?;
    Ok(Delivery {
        id: row.try_get("id")?,
        subscription_id: row.try_get("subscription_id")?,
        event_seq: row.try_get("event_seq")?,
        event_id: row.try_get("event_id")?,
        event_type: row.try_get("event_type")?,
        status: parse_status(&status)?,
        attempts: row.try_get("attempts")?,
        next_attempt_at: opt_from_ms(row.try_get("next_attempt_at")?),
        created_at: from_ms(row.try_get("created_at")?),
        finished_at: opt_from_ms(row.try_get("finished_at")?),
        last_error: row.try_get("last_error")?,
        attempt_log: Vec::new(),
    })
}

macro_rules! subscription_columns {
    () => {
        "id, url, types, description, created_at, tier"
    };
}

macro_rules! delivery_columns {
    () => {
        "id, subscription_id, event_seq, event_id, event_type, status, \
         attempts, next_attempt_at, created_at, finished_at, last_error"
    };
}

pub(crate) use {delivery_columns, subscription_columns};

impl SqliteStore {
    /// Stores a subscription; it receives events committed from now on.
    pub async fn create_subscription(
        &self,
        new: NewSubscription,
    ) -> Result<Subscription, StoreError> {
        self.subscriptions.fetch_add(1, Ordering::AcqRel);
        let stored = self
            .writer
            .run(move |conn| {
                Box::pin(async move {
                    let created = now();
                    let cursor: i64 = sqlx::query_scalar(
                        "SELECT MAX(COALESCE((SELECT MAX(seq) FROM events), 0), \
                         COALESCE((SELECT seq FROM audit_anchor WHERE id = 1), 0))",
                    )
                    .fetch_one(&mut *conn)
                    .await?;
                    sqlx::query(
                        "INSERT INTO subscriptions (id, url, types, description, secret, cursor, created_at, tier) \
                         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    )
                    .bind(&new.id)
                    .bind(&new.url)
                    .bind(serde_json::to_string(&new.types)?)
                    .bind(&new.description)
                    .bind(&new.secret)
                    .bind(cursor)
                    .bind(to_ms(created))
                    .bind(i64::from(new.tier))
                    .execute(&mut *conn)
                    .await?;
                    Ok(Subscription {
                        tier: new.tier,
                        id: new.id,
                        url: new.url,
                        types: new.types,
                        description: new.description,
                        created_at: created,
                    })
                })
            })
            .await;
        if stored.is_err() {
            self.subscriptions.fetch_sub(1, Ordering::AcqRel);
        }
        stored
    }

    /// Every subscription, oldest first.
    pub async fn list_subscriptions(&self) -> Result<Vec<Subscription>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            subscription_columns!(),
            " FROM subscriptions ORDER BY created_at, id"
        ))
        .fetch_all(&self.read)
        .await?;
        rows.iter().map(subscription_from_row).collect()
    }

    /// One subscription.
    pub async fn get_subscription(&self, id: &str) -> Result<Subscription, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            subscription_columns!(),
            " FROM subscriptions WHERE id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.read)
        .await?;
        row.as_ref()
            .map(subscription_from_row)
            .transpose()?
            .ok_or(StoreError::NotFound)
    }

    /// Deletes a subscription with its deliveries.
    pub async fn delete_subscription(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let done = sqlx::query("DELETE FROM subscriptions WHERE id = ?")
                        .bind(&id)
                        .execute(&mut *conn)
                        .await?;
                    if done.rows_affected() == 0 {
                        return Err(StoreError::NotFound);
                    }
                    Ok(())
                })
            })
            .await?;
        self.subscriptions.fetch_sub(1, Ordering::AcqRel);
        Ok(())
    }

    /// Turns up to `limit` events past the subscriptions' cursors into
    /// deliveries and moves the cursors, in one transaction. Returns how
    /// many deliveries were created and whether more events wait.
    pub async fn fan_out(&self, limit: i64) -> Result<(usize, bool), StoreError> {
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let subs: Vec<(String, String, i64, i64)> =
                        sqlx::query_as("SELECT id, types, cursor, tier FROM subscriptions")
                            .fetch_all(&mut *conn)
                            .await?;
                    let Some(min_cursor) = subs.iter().map(|s| s.2).min() else {
                        return Ok((0, false));
                    };
                    let rows = sqlx::query(concat!(
                        "SELECT ",
                        stored_columns!(),
                        " FROM ",
                        stored_from!(),
                        " WHERE events.seq > ? ORDER BY events.seq LIMIT ?"
                    ))
                    .bind(min_cursor)
                    .bind(limit)
                    .fetch_all(&mut *conn)
                    .await?;
                    let events = rows
                        .iter()
                        .map(event_from_row)
                        .collect::<Result<Vec<_>, _>>()?;
                    let Some(last) = events.last().map(|e| e.seq) else {
                        return Ok((0, false));
                    };
                    let created = to_ms(now());
                    let mut made = 0;
                    for (sub_id, types, cursor, tier) in &subs {
                        let types: Vec<String> = serde_json::from_str(types)?;
                        // A stored filter was validated when created; one
                        // that no longer parses sends nothing rather than all.
                        let filter = TypeFilter::parse(&types).ok();
                        for ev in events.iter().filter(|e| e.seq > *cursor) {
                            if !filter.as_ref().is_some_and(|f| f.matches(&ev.kind))
                                || !tier_lets(*tier, &ev.kind)
                            {
                                continue;
                            }
                            sqlx::query(
                                "INSERT INTO deliveries (id, subscription_id, event_seq, event_id, \
                                 event_type, payload, status, attempts, next_attempt_at, created_at) \
                                 VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?) \
                                 ON CONFLICT (subscription_id, event_seq) DO NOTHING",
                            )
                            .bind(uuid::Uuid::now_v7().to_string())
                            .bind(sub_id)
                            .bind(ev.seq)
                            .bind(&ev.id)
                            .bind(&ev.kind)
                            .bind(serde_json::to_string(ev)?)
                            .bind(created)
                            .bind(created)
                            .execute(&mut *conn)
                            .await?;
                            made += 1;
                        }
                        if last > *cursor {
                            sqlx::query("UPDATE subscriptions SET cursor = ? WHERE id = ?")
                                .bind(last)
                                .bind(sub_id)
                                .execute(&mut *conn)
                                .await?;
                        }
                    }
                    Ok((made, events.len() as i64 >= limit))
                })
            })
            .await
    }

    /// Pending deliveries due at `at`, earliest first.
    pub async fn due_deliveries(
        &self,
        at: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<DueDelivery>, StoreError> {
        let rows = sqlx::query(
            "SELECT d.id, d.subscription_id, s.url, s.secret, d.event_id, d.payload, d.attempts, \
             d.created_at FROM deliveries d JOIN subscriptions s ON s.id = d.subscription_id \
             WHERE d.status = 'pending' AND d.next_attempt_at <= ? \
             ORDER BY d.next_attempt_at, d.event_seq LIMIT ?",
        )
        .bind(to_ms(at))
        .bind(limit)
        .fetch_all(&self.read)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(DueDelivery {
                    id: r.try_get("id")?,
                    subscription_id: r.try_get("subscription_id")?,
                    url: r.try_get("url")?,
                    secret: r.try_get("secret")?,
                    event_id: r.try_get("event_id")?,
                    payload: r.try_get("payload")?,
                    attempts: r.try_get("attempts")?,
                    created_at: from_ms(r.try_get("created_at")?),
                })
            })
            .collect()
    }

    /// Whether some subscription has not yet seen the newest event.
    pub async fn outbox_behind(&self) -> Result<bool, StoreError> {
        // None at all (the usual case): nothing to read.
        if self.subscriptions.load(Ordering::Acquire) == 0 {
            return Ok(false);
        }
        Ok(
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM subscriptions WHERE cursor < ?)")
                .bind(self.last_seq())
                .fetch_one(&self.read)
                .await?,
        )
    }

    /// The `limit` earliest pending deliveries and when each is due.
    pub async fn pending_schedule(
        &self,
        limit: i64,
    ) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT id, next_attempt_at FROM deliveries WHERE status = 'pending' \
             ORDER BY next_attempt_at LIMIT ?",
        )
        .bind(limit)
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(|(id, at)| (id, from_ms(at))).collect())
    }

    /// When the next pending delivery is due.
    pub async fn next_delivery_due(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let ms: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(next_attempt_at) FROM deliveries WHERE status = 'pending'",
        )
        .fetch_one(&self.read)
        .await?;
        Ok(ms.map(from_ms))
    }

    /// Records an attempt and what follows from it.
    pub async fn record_attempt(&self, id: &str, rec: AttemptRecord) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let attempts: Option<i64> =
                        sqlx::query_scalar("SELECT attempts FROM deliveries WHERE id = ?")
                            .bind(&id)
                            .fetch_optional(&mut *conn)
                            .await?;
                    // Deleted with its subscription meanwhile: nothing to record.
                    let Some(attempts) = attempts else {
                        return Ok(());
                    };
                    let attempt = attempts + 1;
                    sqlx::query(
                        "INSERT INTO delivery_attempts (delivery_id, attempt, at, status_code, error, duration_ms) \
                         VALUES (?, ?, ?, ?, ?, ?)",
                    )
                    .bind(&id)
                    .bind(attempt)
                    .bind(to_ms(rec.at))
                    .bind(rec.status_code.map(i64::from))
                    .bind(&rec.error)
                    .bind(rec.duration_ms)
                    .execute(&mut *conn)
                    .await?;
                    let finished = to_ms(now());
                    let (status, next, finished) = match rec.outcome {
                        AttemptOutcome::Delivered => ("delivered", None, Some(finished)),
                        AttemptOutcome::Retry(at) => ("pending", Some(to_ms(at)), None),
                        AttemptOutcome::Failed => ("failed", None, Some(finished)),
                    };
                    sqlx::query(
                        "UPDATE deliveries SET attempts = ?, status = ?, next_attempt_at = ?, \
                         finished_at = ?, last_error = COALESCE(?, last_error) WHERE id = ?",
                    )
                    .bind(attempt)
                    .bind(status)
                    .bind(next)
                    .bind(finished)
                    .bind(&rec.error)
                    .bind(&id)
                    .execute(&mut *conn)
                    .await?;
                    Ok(())
                })
            })
            .await
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
            " FROM deliveries WHERE subscription_id = ?1 \
             AND (?2 IS NULL OR status = ?2) AND (?3 IS NULL OR event_seq < ?3) \
             ORDER BY event_seq DESC LIMIT ?4"
        ))
        .bind(subscription_id)
        .bind(status.map(DeliveryStatus::as_str))
        .bind(before)
        .bind(limit)
        .fetch_all(&self.read)
        .await?;
        let mut out = rows
            .iter()
            .map(delivery_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        for d in &mut out {
            let attempts = sqlx::query(
                "SELECT attempt, at, status_code, error, duration_ms FROM delivery_attempts \
                 WHERE delivery_id = ? ORDER BY attempt",
            )
            .bind(&d.id)
            .fetch_all(&self.read)
            .await?;
            d.attempt_log = attempts
                .iter()
                .map(|r| {
                    Ok(DeliveryAttempt {
                        attempt: r.try_get("attempt")?,
                        at: from_ms(r.try_get("at")?),
                        status_code: r.try_get("status_code")?,
                        error: r.try_get("error")?,
                        duration_ms: r.try_get("duration_ms")?,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
        }
        Ok(out)
    }
}
