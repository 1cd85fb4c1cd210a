//! Operations not yet written for Postgres: each fails (503) rather than
//! pretend. Every one moves to the module named for its records as it is
//! written; this file goes away when it is empty.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::anchor::AuditKey;
use crate::audit::Anchor;
use crate::connectors::Outgoing;
use crate::pg::Postgres;
use crate::{
    AttemptRecord, Delivery, DeliveryStatus, DueDelivery, NewSubscription, StoreError, Subscription,
};

fn todo(what: &str) -> StoreError {
    StoreError::Unavailable(format!("{what} is not yet available on Postgres"))
}

#[allow(unused_variables, missing_docs, clippy::unused_async)]
impl Postgres {
    pub async fn start_anchors(&self, key: AuditKey, interval: Duration) {
        tracing::warn!("start_anchors is not yet available on Postgres");
    }
    pub async fn audit_anchor(&self) -> Result<Anchor, StoreError> {
        Err(todo("audit_anchor"))
    }
    pub async fn first_seq_since(&self, at: DateTime<Utc>) -> Result<Option<i64>, StoreError> {
        Err(todo("first_seq_since"))
    }
    pub async fn prune_events(&self, cutoff: DateTime<Utc>, max: i64) -> Result<usize, StoreError> {
        Err(todo("prune_events"))
    }
    pub async fn connector_post(
        &self,
        chat: &str,
        item: &str,
        body: String,
    ) -> Result<bool, StoreError> {
        Err(todo("connector_post"))
    }
    pub async fn connector_open_chats(&self, item: &str) -> Result<Vec<String>, StoreError> {
        Err(todo("connector_open_chats"))
    }
    pub async fn connector_edit(
        &self,
        chat: &str,
        item: &str,
        body: String,
    ) -> Result<bool, StoreError> {
        Err(todo("connector_edit"))
    }
    pub async fn connector_due(
        &self,
        at: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Outgoing>, StoreError> {
        Err(todo("connector_due"))
    }
    pub async fn connector_next_due(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        Err(todo("connector_next_due"))
    }
    pub async fn connector_sent(
        &self,
        id: i64,
        message_ref: Option<String>,
    ) -> Result<(), StoreError> {
        Err(todo("connector_sent"))
    }
    pub async fn connector_retry(
        &self,
        id: i64,
        at: DateTime<Utc>,
        error: String,
    ) -> Result<(), StoreError> {
        Err(todo("connector_retry"))
    }
    pub async fn connector_message_ref(
        &self,
        chat: &str,
        item: &str,
    ) -> Result<Option<String>, StoreError> {
        Err(todo("connector_message_ref"))
    }
    pub async fn connector_item_of(
        &self,
        chat: &str,
        message_ref: &str,
    ) -> Result<Option<String>, StoreError> {
        Err(todo("connector_item_of"))
    }
    pub async fn connector_state(
        &self,
        chat: &str,
        key: &str,
    ) -> Result<Option<String>, StoreError> {
        Err(todo("connector_state"))
    }
    pub async fn set_connector_state(
        &self,
        chat: &str,
        key: &str,
        value: String,
    ) -> Result<(), StoreError> {
        Err(todo("set_connector_state"))
    }
    pub async fn connector_first_seen(&self, chat: &str, id: &str) -> Result<bool, StoreError> {
        Err(todo("connector_first_seen"))
    }
    pub async fn create_subscription(
        &self,
        new: NewSubscription,
    ) -> Result<Subscription, StoreError> {
        Err(todo("create_subscription"))
    }
    pub async fn list_subscriptions(&self) -> Result<Vec<Subscription>, StoreError> {
        Err(todo("list_subscriptions"))
    }
    pub async fn get_subscription(&self, id: &str) -> Result<Subscription, StoreError> {
        Err(todo("get_subscription"))
    }
    pub async fn delete_subscription(&self, id: &str) -> Result<(), StoreError> {
        Err(todo("delete_subscription"))
    }
    pub async fn fan_out(&self, limit: i64) -> Result<(usize, bool), StoreError> {
        Err(todo("fan_out"))
    }
    pub async fn due_deliveries(
        &self,
        at: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<DueDelivery>, StoreError> {
        Err(todo("due_deliveries"))
    }
    pub async fn outbox_behind(&self) -> Result<bool, StoreError> {
        Err(todo("outbox_behind"))
    }
    pub async fn pending_schedule(
        &self,
        limit: i64,
    ) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
        Err(todo("pending_schedule"))
    }
    pub async fn next_delivery_due(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        Err(todo("next_delivery_due"))
    }
    pub async fn record_attempt(&self, id: &str, rec: AttemptRecord) -> Result<(), StoreError> {
        Err(todo("record_attempt"))
    }
    pub async fn list_deliveries(
        &self,
        subscription_id: &str,
        status: Option<DeliveryStatus>,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<Delivery>, StoreError> {
        Err(todo("list_deliveries"))
    }
}
