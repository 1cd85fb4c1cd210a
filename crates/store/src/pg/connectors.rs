//! What the chat connectors keep, on Postgres (see `crate::connectors`).
//!
//! Every node hears every event, so every node queues the same posts and
//! edits: the primary key of `connector_messages` (`ON CONFLICT DO
//! NOTHING`) and the compare-and-set on `settled` let one of them queue
//! each. Every node runs the sender: a node takes due messages with `FOR
//! UPDATE SKIP LOCKED` and a lease in its name (as deliveries, see
//! `subscriptions`), so a message goes out from one node; a retry is
//! recorded only by the node that still holds the message.

use chrono::{DateTime, Utc};

use crate::connectors::Outgoing;
use crate::error::StoreError;
use crate::pg::Postgres;
use crate::pg::subscriptions::due_for_me;
use crate::row::Cols;
use crate::time::{from_ms, now, to_ms};

/// How long a handled interaction id is remembered (as on SQLite).
const SEEN_KEEP_MS: i64 = 7 * 24 * 3600 * 1000;

impl Postgres {
    /// Queues the message of `item` in `chat` unless one was queued before;
    /// whether it was queued now.
    pub async fn connector_post(
        &self,
        chat: &str,
        item: &str,
        body: String,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let at = to_ms(now());
        let done = sqlx::query(
            "INSERT INTO connector_messages (chat, item, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT DO NOTHING",
        )
        .bind(chat)
        .bind(item)
        .bind(at)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        queue(&mut tx, chat, item, "post", &body, at).await?;
        self.commit(tx, Vec::new()).await?;
        Ok(true)
    }

    /// The chats that have a message of `item` whose outcome is not queued.
    pub async fn connector_open_chats(&self, item: &str) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT chat FROM connector_messages WHERE item = $1 AND settled = 0 ORDER BY chat",
        )
        .bind(item)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Queues the outcome edit of `item`'s message in `chat` once; whether
    /// it was queued now.
    pub async fn connector_edit(
        &self,
        chat: &str,
        item: &str,
        body: String,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let done = sqlx::query(
            "UPDATE connector_messages SET settled = 1 \
             WHERE chat = $1 AND item = $2 AND settled = 0",
        )
        .bind(chat)
        .bind(item)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        queue(&mut tx, chat, item, "edit", &body, to_ms(now())).await?;
        self.commit(tx, Vec::new()).await?;
        Ok(true)
    }

    /// See `SqliteStore::connector_update`.
    pub async fn connector_update(
        &self,
        chat: &str,
        item: &str,
        body: String,
    ) -> Result<bool, StoreError> {
        let at = to_ms(now());
        let mut tx = self.begin().await?;
        // The message's row, locked: daemons queueing the same update at
        // once take turns, and each one's check below (a statement of its
        // own, so it reads what the one before committed) sees the other's.
        let open = sqlx::query(
            "SELECT 1 FROM connector_messages WHERE chat = $1 AND item = $2 AND settled = 0 \
             FOR UPDATE",
        )
        .bind(chat)
        .bind(item)
        .fetch_optional(&mut *tx)
        .await?;
        if open.is_none() {
            return Ok(false);
        }
        let done = sqlx::query(
            "INSERT INTO connector_outbox (chat, item, kind, body, next_attempt_at, created_at) \
             SELECT $3, $4, 'edit', $1, $2, $2 WHERE NOT EXISTS (SELECT 1 FROM connector_outbox o \
               WHERE o.chat = $3 AND o.item = $4 AND o.body = $1)",
        )
        .bind(&body)
        .bind(at)
        .bind(chat)
        .bind(item)
        .execute(&mut *tx)
        .await?;
        self.commit(tx, Vec::new()).await?;
        Ok(done.rows_affected() == 1)
    }

    /// Up to `limit` outgoing messages due at `at`, oldest first, taken by
    /// this node until sent, retried or their lease lapses.
    pub async fn connector_due(
        &self,
        at: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Outgoing>, StoreError> {
        let rows = sqlx::query(
            // Up to `limit` per chat, so a chat with a backlog never
            // holds back another's messages.
            "WITH due AS (SELECT m.id FROM \
               (SELECT DISTINCT chat FROM connector_outbox WHERE next_attempt_at <= $1) c \
               CROSS JOIN LATERAL (SELECT id FROM connector_outbox \
                 WHERE chat = c.chat AND next_attempt_at <= $1 \
                 AND (claim_until IS NULL OR claim_until <= $1 OR claimed_by = $2) \
                 ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED) m) \
             UPDATE connector_outbox o SET claimed_by = $2, claim_until = $4 FROM due \
             WHERE o.id = due.id \
             RETURNING o.id, o.chat, o.item, o.kind, o.body, o.attempts, o.created_at",
        )
        .bind(to_ms(at))
        .bind(&*self.node)
        .bind(limit)
        .bind(to_ms(at + self.chat_lease))
        .fetch_all(&self.pool)
        .await?;
        let mut out = rows
            .iter()
            .map(|r| {
                Ok(Outgoing {
                    id: r.try_get("id")?,
                    chat: r.try_get("chat")?,
                    item: r.try_get("item")?,
                    kind: r.try_get("kind")?,
                    body: r.try_get("body")?,
                    attempts: r.try_get("attempts")?,
                    created_at: from_ms(r.try_get("created_at")?),
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        out.sort_by_key(|o| o.id);
        Ok(out)
    }

    /// When the next outgoing message is due for this node, if any waits.
    pub async fn connector_next_due(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let ms: Option<i64> = sqlx::query_scalar(concat!(
            "SELECT MIN(",
            due_for_me!(),
            ") FROM connector_outbox"
        ))
        .bind(to_ms(now()))
        .bind(&*self.node)
        .fetch_one(&self.pool)
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
        let mut tx = self.begin().await?;
        if let Some(r) = &message_ref {
            sqlx::query(
                "UPDATE connector_messages m SET message_ref = $1 FROM connector_outbox o \
                 WHERE o.id = $2 AND m.chat = o.chat AND m.item = o.item",
            )
            .bind(r)
            .bind(id)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO connector_copies (chat, message_ref, item, created_at) \
                 SELECT chat, $1, item, $2 FROM connector_outbox WHERE id = $3 \
                 ON CONFLICT DO NOTHING",
            )
            .bind(r)
            .bind(to_ms(now()))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("DELETE FROM connector_outbox WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        self.commit(tx, Vec::new()).await?;
        Ok(())
    }

    /// Records a failed attempt of `id` and when to try again, unless
    /// another node took the message over meanwhile (it decides then).
    pub async fn connector_retry(
        &self,
        id: i64,
        at: DateTime<Utc>,
        error: String,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE connector_outbox SET attempts = attempts + 1, next_attempt_at = $1, \
             last_error = $2, claimed_by = NULL, claim_until = NULL \
             WHERE id = $3 AND (claimed_by IS NULL OR claimed_by = $4)",
        )
        .bind(to_ms(at))
        .bind(&error)
        .bind(id)
        .bind(&*self.node)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The chat's id of `item`'s message in `chat`, once sent.
    pub async fn connector_message_ref(
        &self,
        chat: &str,
        item: &str,
    ) -> Result<Option<String>, StoreError> {
        let r: Option<Option<String>> = sqlx::query_scalar(
            "SELECT message_ref FROM connector_messages WHERE chat = $1 AND item = $2",
        )
        .bind(chat)
        .bind(item)
        .fetch_optional(&self.pool)
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
            "SELECT item FROM connector_copies WHERE chat = $1 AND message_ref = $2",
        )
        .bind(chat)
        .bind(message_ref)
        .fetch_optional(&self.pool)
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
             WHERE item = $1 AND chat = $2 AND edited = 0 ORDER BY created_at, message_ref",
        )
        .bind(item)
        .bind(chat)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Message `message_ref` of `chat` shows its item's outcome (or its
    /// edit was given up).
    pub async fn connector_copy_edited(
        &self,
        chat: &str,
        message_ref: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE connector_copies SET edited = 1 WHERE chat = $1 AND message_ref = $2")
            .bind(chat)
            .bind(message_ref)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records `message_ref` as one more message of `item` in `chat` when
    /// `item` has a message there; whether it was not known before.
    pub async fn connector_learn_copy(
        &self,
        chat: &str,
        item: &str,
        message_ref: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO connector_copies (chat, message_ref, item, created_at) \
             SELECT chat, $1, item, $2 FROM connector_messages WHERE chat = $3 AND item = $4 \
             ON CONFLICT DO NOTHING",
        )
        .bind(message_ref)
        .bind(to_ms(now()))
        .bind(chat)
        .bind(item)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Queues one more outcome edit of `item`'s messages in `chat` (for a
    /// copy learned after the outcome): it edits the ones not edited yet.
    pub async fn connector_edit_again(
        &self,
        chat: &str,
        item: &str,
        body: String,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query("UPDATE connector_messages SET settled = 1 WHERE chat = $1 AND item = $2")
            .bind(chat)
            .bind(item)
            .execute(&mut *tx)
            .await?;
        queue(&mut tx, chat, item, "edit", &body, to_ms(now())).await?;
        self.commit(tx, Vec::new()).await?;
        Ok(())
    }

    /// Whether the post of `item`'s message in `chat` is still queued.
    pub async fn connector_post_queued(&self, chat: &str, item: &str) -> Result<bool, StoreError> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM connector_outbox WHERE chat = $1 AND item = $2 AND kind = 'post'",
        )
        .bind(chat)
        .bind(item)
        .fetch_one(&self.pool)
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
            sqlx::query_scalar("SELECT value FROM connector_state WHERE chat = $1 AND key = $2")
                .bind(chat)
                .bind(key)
                .fetch_optional(&self.pool)
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
        sqlx::query(
            "INSERT INTO connector_state (chat, key, value) VALUES ($1, $2, $3) \
             ON CONFLICT (chat, key) DO UPDATE SET value = excluded.value",
        )
        .bind(chat)
        .bind(key)
        .bind(&value)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records interaction `id` of `chat` as handled: `true` the first
    /// time (on any node), `false` for a repeat. Ids older than a week are
    /// forgotten.
    pub async fn connector_first_seen(&self, chat: &str, id: &str) -> Result<bool, StoreError> {
        let at = to_ms(now());
        sqlx::query("DELETE FROM connector_seen WHERE seen_at < $1")
            .bind(at - SEEN_KEEP_MS)
            .execute(&self.pool)
            .await?;
        // A concurrent insert of the same id (another node) waits for the
        // first to commit and then inserts nothing.
        let done = sqlx::query(
            "INSERT INTO connector_seen (chat, interaction, seen_at) VALUES ($1, $2, $3) \
             ON CONFLICT DO NOTHING",
        )
        .bind(chat)
        .bind(id)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

/// Adds a message to the outbox, due at once.
async fn queue(
    conn: &mut sqlx::PgConnection,
    chat: &str,
    item: &str,
    kind: &str,
    body: &str,
    at: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO connector_outbox (chat, item, kind, body, next_attempt_at, created_at) \
         VALUES ($1, $2, $3, $4, $5, $5)",
    )
    .bind(chat)
    .bind(item)
    .bind(kind)
    .bind(body)
    .bind(at)
    .execute(conn)
    .await?;
    Ok(())
}
