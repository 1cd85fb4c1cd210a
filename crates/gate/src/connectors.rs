//! What chat connectors keep, as gate workflows: the queue of outgoing
//! messages (posted once per item and chat, edited once with the outcome),
//! the chat's message ids, small state and handled interaction ids. A
//! connector reaches the store only through these.

use chrono::{DateTime, Utc};

pub use actiongate_store::connectors::Outgoing;

use crate::{Gate, GateResult};

impl Gate {
    /// Queues `item`'s message (`body`, a rendered card) in `chat` unless it
    /// was queued before; whether it was queued now.
    pub async fn connector_post(&self, chat: &str, item: &str, body: String) -> GateResult<bool> {
        Ok(self.store().connector_post(chat, item, body).await?)
    }

    /// The chats holding a message of `item` whose outcome is not queued.
    pub async fn connector_open_chats(&self, item: &str) -> GateResult<Vec<String>> {
        Ok(self.store().connector_open_chats(item).await?)
    }

    /// Queues the outcome edit of `item`'s message in `chat`, once.
    pub async fn connector_edit(&self, chat: &str, item: &str, body: String) -> GateResult<bool> {
        Ok(self.store().connector_edit(chat, item, body).await?)
    }

    /// Queues an update of `item`'s message in `chat` while its outcome
    /// is not queued: it shows the item as it is when sent.
    pub async fn connector_update(&self, chat: &str, item: &str, body: String) -> GateResult<bool> {
        Ok(self.store().connector_update(chat, item, body).await?)
    }

    /// Outgoing messages due now: up to `limit` of each chat, oldest first.
    pub async fn connector_due(&self, limit: i64) -> GateResult<Vec<Outgoing>> {
        Ok(self.store().connector_due(Utc::now(), limit).await?)
    }

    /// When the next outgoing message is due.
    pub async fn connector_next_due(&self) -> GateResult<Option<DateTime<Utc>>> {
        Ok(self.store().connector_next_due().await?)
    }

    /// Outgoing message `id` was sent (with the chat's message id, for a
    /// post) or given up.
    pub async fn connector_sent(&self, id: i64, message_ref: Option<String>) -> GateResult<()> {
        Ok(self.store().connector_sent(id, message_ref).await?)
    }

    /// Outgoing message `id` failed; tried again at `at`.
    pub async fn connector_retry(
        &self,
        id: i64,
        at: DateTime<Utc>,
        error: String,
    ) -> GateResult<()> {
        Ok(self.store().connector_retry(id, at, error).await?)
    }

    /// The chat's id of `item`'s message in `chat`, once sent.
    pub async fn connector_message_ref(
        &self,
        chat: &str,
        item: &str,
    ) -> GateResult<Option<String>> {
        Ok(self.store().connector_message_ref(chat, item).await?)
    }

    /// The item whose message in `chat` has id `message_ref`.
    pub async fn connector_item_of(
        &self,
        chat: &str,
        message_ref: &str,
    ) -> GateResult<Option<String>> {
        Ok(self.store().connector_item_of(chat, message_ref).await?)
    }

    /// The ids of `item`'s messages in `chat` its outcome has not edited
    /// yet (a lost answer can leave several).
    pub async fn connector_unedited(&self, chat: &str, item: &str) -> GateResult<Vec<String>> {
        Ok(self.store().connector_unedited(chat, item).await?)
    }

    /// Message `message_ref` of `chat` shows its item's outcome.
    pub async fn connector_copy_edited(&self, chat: &str, message_ref: &str) -> GateResult<()> {
        Ok(self
            .store()
            .connector_copy_edited(chat, message_ref)
            .await?)
    }

    /// Records `message_ref` as a message of `item` in `chat` (learned
    /// from a tap on it or a reply to it); whether it was new.
    pub async fn connector_learn_copy(
        &self,
        chat: &str,
        item: &str,
        message_ref: &str,
    ) -> GateResult<bool> {
        Ok(self
            .store()
            .connector_learn_copy(chat, item, message_ref)
            .await?)
    }

    /// Queues one more outcome edit of `item`'s messages in `chat`.
    pub async fn connector_edit_again(
        &self,
        chat: &str,
        item: &str,
        body: String,
    ) -> GateResult<()> {
        Ok(self.store().connector_edit_again(chat, item, body).await?)
    }

    /// Whether the post of `item`'s message in `chat` is still queued.
    pub async fn connector_post_queued(&self, chat: &str, item: &str) -> GateResult<bool> {
        Ok(self.store().connector_post_queued(chat, item).await?)
    }

    /// A value `chat` keeps (Telegram's update offset).
    pub async fn connector_state(&self, chat: &str, key: &str) -> GateResult<Option<String>> {
        Ok(self.store().connector_state(chat, key).await?)
    }

    /// Keeps a value for `chat`.
    pub async fn set_connector_state(
        &self,
        chat: &str,
        key: &str,
        value: String,
    ) -> GateResult<()> {
        Ok(self.store().set_connector_state(chat, key, value).await?)
    }

    /// Whether interaction `id` of `chat` is seen for the first time (it is
    /// recorded as seen).
    pub async fn connector_first_seen(&self, chat: &str, id: &str) -> GateResult<bool> {
        Ok(self.store().connector_first_seen(chat, id).await?)
    }
}
