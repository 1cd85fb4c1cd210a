//! What the chat connectors keep: the queue of outgoing messages, the
//! chat's message id of each item's message (and of every copy of it a
//! lost answer made, once known), small state (Telegram's
//! update offset) and the interaction ids already handled. Reached only
//! through the gate's connector methods.

use chrono::{DateTime, Utc};
use sqlx::Row;

use crate::SqliteStore;
use crate::error::StoreError;
use crate::time::{from_ms, now, to_ms};

/// How long a handled interaction id is remembered.
const SEEN_KEEP_MS: i64 = 7 * 24 * 3600 * 1000;

/// An outgoing message that is due.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    /// Its row id.
    pub id: i64,
    /// The chat (`telegram`, `slack`, `discord`, `whatsapp:<phone>`).
    pub chat: String,
    /// The item (an action id, or `gr:<id>`).
    pub item: String,
    /// `post` or `edit`.
    pub kind: String,
    /// The rendered card, JSON.
    pub body: String,
    /// Attempts made so far.
    pub attempts: i64,
    /// When it was queued.
    pub created_at: DateTime<Utc>,
}

impl SqliteStore {
    /// Queues the message of `item` in `chat` unless one was queued before;
    /// whether it was queued now.
    pub async fn connector_post(
        &self,
        chat: &str,
        item: &str,
        body: String,
    ) -> Result<bool, StoreError> {
        let (chat, item) = (chat.to_owned(), item.to_owned());
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let at = to_ms(now());
                    let done = sqlx::query(
                        "INSERT OR IGNORE INTO connector_messages (chat, item, created_at) \
                         VALUES (?, ?, ?)",
                    )
                    .bind(&chat)
                    .bind(&item)
                    .bind(at)
                    .execute(&mut *conn)
                    .await?;
                    if done.rows_affected() == 0 {
                        return Ok(false);
                    }
                    sqlx::query(
                        "INSERT INTO connector_outbox (chat, item, kind, body, next_attempt_at, created_at) \
                         VALUES (?, ?, 'post', ?, ?, ?)",
                    )
                    .bind(&chat)
                    .bind(&item)
                    .bind(&body)
                    .bind(at)
                    .bind(at)
                    .execute(&mut *conn)
                    .await?;
                    Ok(true)
                })
            })
            .await
    }

    /// The chats that have a message of `item` whose outcome is not queued.
    pub async fn connector_open_chats(&self, item: &str) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT chat FROM connector_messages WHERE item = ? AND settled = 0 ORDER BY chat",
        )
        .bind(item)
        .fetch_all(&self.read)
        .await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).map_err(StoreError::from))
            .collect()
    }

    /// Queues the outcome edit of `item`'s message in `chat` once; whether
    /// it was queued now.
    pub async fn connector_edit(
        &self,
        chat: &str,
        item: &str,
        body: String,
    ) -> Result<bool, StoreError> {
        let (chat, item) = (chat.to_owned(), item.to_owned());
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let done = sqlx::query(
                        "UPDATE connector_messages SET settled = 1 \
                         WHERE chat = ? AND item = ? AND settled = 0",
                    )
                    .bind(&chat)
                    .bind(&item)
                    .execute(&mut *conn)
                    .await?;
                    if done.rows_affected() == 0 {
                        return Ok(false);
                    }
                    let at = to_ms(now());
                    sqlx::query(
                        "INSERT INTO connector_outbox (chat, item, kind, body, next_attempt_at, created_at) \
                         VALUES (?, ?, 'edit', ?, ?, ?)",
                    )
                    .bind(&chat)
                    .bind(&item)
                    .bind(&body)
                    .bind(at)
                    .bind(at)
                    .execute(&mut *conn)
                    .await?;
                    Ok(true)
                })
            })
            .await
    }

    /// Queues an update of `item`'s message in `chat` while its outcome is
    /// not queued (an `edit` whose card says `progress`: it shows the item
    /// as it is when sent, keeping its buttons), unless the same update
    /// (the same `body`, as every daemon makes it of one event) is queued
    /// already; whether it was queued.
    pub async fn connector_update(
        &self,
        chat: &str,
        item: &str,
        body: String,
    ) -> Result<bool, StoreError> {
        let (chat, item) = (chat.to_owned(), item.to_owned());
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let at = to_ms(now());
                    let done = sqlx::query(
                        "INSERT INTO connector_outbox (chat, item, kind, body, next_attempt_at, created_at) \
                         SELECT chat, item, 'edit', ?1, ?2, ?2 FROM connector_messages m \
                         WHERE m.chat = ?3 AND m.item = ?4 AND m.settled = 0 \
                         AND NOT EXISTS (SELECT 1 FROM connector_outbox o \
                           WHERE o.chat = ?3 AND o.item = ?4 AND o.body = ?1)",
                    )
                    .bind(&body)
                    .bind(at)
                    .bind(&chat)
                    .bind(&item)
                    .execute(&mut *conn)
                    .await?;
                    Ok(done.rows_affected() == 1)
                })
            })
            .await
    }

    /// Outgoing messages due at `at`: up to `limit` of each chat, oldest
    /// first. Per chat, so that the backlog of a chat whose API hangs never
    /// hides another chat's messages.
    pub async fn connector_due(
        &self,
        at: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Outgoing>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, chat, item, kind, body, attempts, created_at FROM ( \
               SELECT id, chat, item, kind, body, attempts, created_at, \
                      ROW_NUMBER() OVER (PARTITION BY chat ORDER BY id) AS n \
               FROM connector_outbox WHERE next_attempt_at <= ?) \
             WHERE n <= ? ORDER BY id",
        )
        .bind(to_ms(at))
        .bind(limit)
        .fetch_all(&self.read)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Outgoing {
                    id: r.try_get(0)?,
                    chat: r.try_get(1)?,
                    item: r.try_get(2)?,
                    kind: r.try_get(3)?,
                    body: r.try_get(4)?,
                    attempts: r.try_get(5)?,
                    created_at: from_ms(r.try_get(6)?),
                })
            })
            .collect()
    }

    /// When the next outgoing message is due, if any waits.
    pub async fn connector_next_due(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let ms: Option<i64> =
            sqlx::query_scalar("SELECT MIN(next_attempt_at) FROM connector_outbox")
                .fetch_one(&self.read)
                .await?;
        Ok(ms.map(from_ms))
    }

    /// Forgets outgoing message `id` (sent, or given up), recording the
    /// chat's message id when a post was sent.
    pub async fn connector_sent(
        &self,
        id: i64,
        message_ref: Option<String>,
    ) -> Result<(), StoreError> {
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    if let Some(r) = &message_ref {
                        sqlx::query(
                            "UPDATE connector_messages SET message_ref = ? WHERE (chat, item) = \
                             (SELECT chat, item FROM connector_outbox WHERE id = ?)",
                        )
                        .bind(r)
                        .bind(id)
                        .execute(&mut *conn)
                        .await?;
                        sqlx::query(
                            "INSERT OR IGNORE INTO connector_copies \
                             (chat, message_ref, item, created_at) \
                             SELECT chat, ?, item, ? FROM connector_outbox WHERE id = ?",
                        )
                        .bind(r)
                        .bind(to_ms(now()))
                        .bind(id)
                        .execute(&mut *conn)
                        .await?;
                    }
                    sqlx::query("DELETE FROM connector_outbox WHERE id = ?")
                        .bind(id)
                        .execute(&mut *conn)
                        .await?;
                    Ok(())
                })
            })
            .await
    }

    /// Records a failed attempt of `id` and when to try again.
    pub async fn connector_retry(
        &self,
        id: i64,
        at: DateTime<Utc>,
        error: String,
    ) -> Result<(), StoreError> {
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    sqlx::query(
                        "UPDATE connector_outbox SET attempts = attempts + 1, next_attempt_at = ?, \
                         last_error = ? WHERE id = ?",
                    )
                    .bind(to_ms(at))
                    .bind(&error)
                    .bind(id)
                    .execute(&mut *conn)
                    .await?;
                    Ok(())
                })
            })
            .await
    }

    /// The chat's id of `item`'s message in `chat`, once sent.
    pub async fn connector_message_ref(
        &self,
        chat: &str,
        item: &str,
    ) -> Result<Option<String>, StoreError> {
        let r: Option<Option<String>> = sqlx::query_scalar(
            "SELECT message_ref FROM connector_messages WHERE chat = ? AND item = ?",
        )
        .bind(chat)
        .bind(item)
        .fetch_optional(&self.read)
        .await?;
        Ok(r.flatten())
    }

    /// The item whose message in `chat` has id `message_ref`.
    pub async fn connector_item_of(
        &self,
        chat: &str,
        message_ref: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT item FROM connector_copies WHERE chat = ? AND message_ref = ?",
        )
        .bind(chat)
        .bind(message_ref)
        .fetch_optional(&self.read)
        .await?)
    }

    /// The ids of `item`'s messages in `chat` its outcome has not edited
    /// yet, oldest first.
    pub async fn connector_unedited(
        &self,
        chat: &str,
        item: &str,
    ) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT message_ref FROM connector_copies \
             WHERE item = ? AND chat = ? AND edited = 0 ORDER BY created_at, message_ref",
        )
        .bind(item)
        .bind(chat)
        .fetch_all(&self.read)
        .await?)
    }

    /// Message `message_ref` of `chat` shows its item's outcome (or its
    /// edit was given up).
    pub async fn connector_copy_edited(
        &self,
        chat: &str,
        message_ref: &str,
    ) -> Result<(), StoreError> {
        let (chat, message_ref) = (chat.to_owned(), message_ref.to_owned());
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    sqlx::query(
                        "UPDATE connector_copies SET edited = 1 WHERE chat = ? AND message_ref = ?",
                    )
                    .bind(&chat)
                    .bind(&message_ref)
                    .execute(&mut *conn)
                    .await?;
                    Ok(())
                })
            })
            .await
    }

    /// Records `message_ref` as one more message of `item` in `chat` (a
    /// copy learned from a tap or a reply), when `item` has a message
    /// there; whether it was not known before.
    pub async fn connector_learn_copy(
        &self,
        chat: &str,
        item: &str,
        message_ref: &str,
    ) -> Result<bool, StoreError> {
        let (chat, item, message_ref) = (chat.to_owned(), item.to_owned(), message_ref.to_owned());
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let done = sqlx::query(
                        "INSERT OR IGNORE INTO connector_copies (chat, message_ref, item, created_at) \
                         SELECT chat, ?, item, ? FROM connector_messages WHERE chat = ? AND item = ?",
                    )
                    .bind(&message_ref)
                    .bind(to_ms(now()))
                    .bind(&chat)
                    .bind(&item)
                    .execute(&mut *conn)
                    .await?;
                    Ok(done.rows_affected() == 1)
                })
            })
            .await
    }

    /// Queues one more outcome edit of `item`'s messages in `chat` (for a
    /// copy learned after the outcome): it edits the ones not edited yet.
    pub async fn connector_edit_again(
        &self,
        chat: &str,
        item: &str,
        body: String,
    ) -> Result<(), StoreError> {
        let (chat, item) = (chat.to_owned(), item.to_owned());
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let at = to_ms(now());
                    sqlx::query(
                        "UPDATE connector_messages SET settled = 1 WHERE chat = ? AND item = ?",
                    )
                    .bind(&chat)
                    .bind(&item)
                    .execute(&mut *conn)
                    .await?;
                    sqlx::query(
                        "INSERT INTO connector_outbox (chat, item, kind, body, next_attempt_at, created_at) \
                         VALUES (?, ?, 'edit', ?, ?, ?)",
                    )
                    .bind(&chat)
                    .bind(&item)
                    .bind(&body)
                    .bind(at)
                    .bind(at)
                    .execute(&mut *conn)
                    .await?;
                    Ok(())
                })
            })
            .await
    }

    /// Whether the post of `item`'s message in `chat` is still queued (not
    /// sent nor given up).
    pub async fn connector_post_queued(&self, chat: &str, item: &str) -> Result<bool, StoreError> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM connector_outbox WHERE chat = ? AND item = ? AND kind = 'post'",
        )
        .bind(chat)
        .bind(item)
        .fetch_one(&self.read)
        .await?;
        Ok(n > 0)
    }

    /// A value `chat` keeps.
    pub async fn connector_state(
        &self,
        chat: &str,
        key: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT value FROM connector_state WHERE chat = ? AND key = ?")
                .bind(chat)
                .bind(key)
                .fetch_optional(&self.read)
                .await?,
        )
    }

    /// Keeps `value` for `chat`.
    pub async fn set_connector_state(
        &self,
        chat: &str,
        key: &str,
        value: String,
    ) -> Result<(), StoreError> {
        let (chat, key) = (chat.to_owned(), key.to_owned());
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    sqlx::query(
                        "INSERT INTO connector_state (chat, key, value) VALUES (?, ?, ?) \
                         ON CONFLICT (chat, key) DO UPDATE SET value = excluded.value",
                    )
                    .bind(&chat)
                    .bind(&key)
                    .bind(&value)
                    .execute(&mut *conn)
                    .await?;
                    Ok(())
                })
            })
            .await
    }

    /// Records interaction `id` of `chat` as handled: `true` the first
    /// time, `false` for a repeat. Ids older than a week are forgotten.
    pub async fn connector_first_seen(&self, chat: &str, id: &str) -> Result<bool, StoreError> {
        let (chat, id) = (chat.to_owned(), id.to_owned());
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let at = to_ms(now());
                    sqlx::query("DELETE FROM connector_seen WHERE seen_at < ?")
                        .bind(at - SEEN_KEEP_MS)
                        .execute(&mut *conn)
                        .await?;
                    let done = sqlx::query(
                        "INSERT OR IGNORE INTO connector_seen (chat, interaction, seen_at) VALUES (?, ?, ?)",
                    )
                    .bind(&chat)
                    .bind(&id)
                    .bind(at)
                    .execute(&mut *conn)
                    .await?;
                    Ok(done.rows_affected() == 1)
                })
            })
            .await
    }
}
