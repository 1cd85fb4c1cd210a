//! Operations not yet written for Postgres: each fails (503) rather than
//! pretend. Every one moves to the module named for its records as it is
//! written; this file goes away when it is empty.

use std::time::Duration;

use actiongate_policy as policy;
use chrono::{DateTime, Utc};

use crate::anchor::AuditKey;
use crate::audit::Anchor;
use crate::connectors::Outgoing;
use crate::pg::Postgres;
use crate::{
    Action, ActionAttempt, ApproveFirst, AttemptNext, AttemptRecord, Claimed, Delivery,
    DeliveryStatus, DueDelivery, GrantCreated, GrantFilter, GrantRecord, GrantRequest,
    GrantRequestStatus, HandlerRecord, HandlerSecrets, NewGrant, NewGrantRequest, NewHandler,
    NewSubscription, NextDispatch, Outcome, StoreError, Subscription,
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
    pub async fn due_for_dispatch(
        &self,
        at: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        Err(todo("due_for_dispatch"))
    }
    pub async fn claim(
        &self,
        ids: Vec<String>,
        lease_until: DateTime<Utc>,
    ) -> Result<Vec<Claimed>, StoreError> {
        Err(todo("claim"))
    }
    pub async fn claim_next(
        &self,
        handler: &str,
        at: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<Claimed>, StoreError> {
        Err(todo("claim_next"))
    }
    pub async fn settle_attempt(
        &self,
        running: &Action,
        rec: &ActionAttempt,
        outcome: Outcome,
    ) -> Result<Option<Action>, StoreError> {
        Err(todo("settle_attempt"))
    }
    pub async fn finish_attempt(
        &self,
        id: &str,
        rec: ActionAttempt,
        next: AttemptNext,
    ) -> Result<Option<Action>, StoreError> {
        Err(todo("finish_attempt"))
    }
    pub async fn release_leases(
        &self,
        at: DateTime<Utc>,
        max_attempts: i64,
        all: bool,
    ) -> Result<Vec<Action>, StoreError> {
        Err(todo("release_leases"))
    }
    pub async fn next_dispatch_times(&self) -> Result<NextDispatch, StoreError> {
        Err(todo("next_dispatch_times"))
    }
    pub async fn accept_result(
        &self,
        id: &str,
        webhook_id: String,
        attempt: i64,
        outcome: Outcome,
    ) -> Result<Action, StoreError> {
        Err(todo("accept_result"))
    }
    pub async fn prune_seen_webhooks(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        Err(todo("prune_seen_webhooks"))
    }
    pub async fn consume_webhook(&self, webhook_id: String) -> Result<bool, StoreError> {
        Err(todo("consume_webhook"))
    }
    pub async fn rotate_handler_secret(
        &self,
        id: &str,
        secret: String,
        grace_until: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        Err(todo("rotate_handler_secret"))
    }
    pub async fn handler_secret_set(&self, id: &str) -> Result<HandlerSecrets, StoreError> {
        Err(todo("handler_secret_set"))
    }
    pub async fn handler_secrets(&self, id: &str) -> Result<Vec<String>, StoreError> {
        Err(todo("handler_secrets"))
    }
    pub async fn create_grant_request(
        &self,
        new: NewGrantRequest,
    ) -> Result<GrantRequest, StoreError> {
        Err(todo("create_grant_request"))
    }
    pub async fn approve_grant_request(
        &self,
        id: &str,
        grant: NewGrant,
    ) -> Result<(GrantRequest, GrantCreated), StoreError> {
        Err(todo("approve_grant_request"))
    }
    pub async fn deny_grant_request(
        &self,
        id: &str,
        decided_by: String,
        reason: Option<String>,
    ) -> Result<GrantRequest, StoreError> {
        Err(todo("deny_grant_request"))
    }
    pub async fn expire_grant_requests(
        &self,
        at: DateTime<Utc>,
    ) -> Result<Vec<GrantRequest>, StoreError> {
        Err(todo("expire_grant_requests"))
    }
    pub async fn next_grant_request_deadline(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        Err(todo("next_grant_request_deadline"))
    }
    pub async fn get_grant_request(&self, id: &str) -> Result<GrantRequest, StoreError> {
        Err(todo("get_grant_request"))
    }
    pub async fn list_grant_requests(
        &self,
        agent: Option<&str>,
        status: Option<GrantRequestStatus>,
    ) -> Result<Vec<GrantRequest>, StoreError> {
        Err(todo("list_grant_requests"))
    }
    pub async fn create_grant(
        &self,
        new: NewGrant,
        first: Option<ApproveFirst>,
    ) -> Result<GrantCreated, StoreError> {
        Err(todo("create_grant"))
    }
    pub async fn revoke_grant(&self, id: &str) -> Result<GrantRecord, StoreError> {
        Err(todo("revoke_grant"))
    }
    pub async fn get_grant(&self, id: &str) -> Result<GrantRecord, StoreError> {
        Err(todo("get_grant"))
    }
    pub async fn list_grants(&self, f: &GrantFilter) -> Result<Vec<GrantRecord>, StoreError> {
        Err(todo("list_grants"))
    }
    pub async fn active_grants(
        &self,
        agent: &str,
        tool: &str,
    ) -> Result<Vec<policy::Grant>, StoreError> {
        Err(todo("active_grants"))
    }
    pub async fn create_handler(
        &self,
        h: NewHandler,
        secret: String,
    ) -> Result<HandlerRecord, StoreError> {
        Err(todo("create_handler"))
    }
    pub async fn replace_handler(&self, h: NewHandler) -> Result<HandlerRecord, StoreError> {
        Err(todo("replace_handler"))
    }
    pub async fn retire_handler(&self, id: &str) -> Result<HandlerRecord, StoreError> {
        Err(todo("retire_handler"))
    }
    pub async fn get_handler(&self, id: &str) -> Result<HandlerRecord, StoreError> {
        Err(todo("get_handler"))
    }
    pub async fn list_handlers(
        &self,
        include_retired: bool,
    ) -> Result<Vec<HandlerRecord>, StoreError> {
        Err(todo("list_handlers"))
    }
    pub async fn handler_secret(&self, id: &str) -> Result<String, StoreError> {
        Err(todo("handler_secret"))
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
