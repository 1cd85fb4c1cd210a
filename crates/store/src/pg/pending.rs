//! Operations not yet written for Postgres: each fails (503) rather than
//! pretend. Every one moves to the module named for its records as it is
//! written; this file goes away when it is empty.

use chrono::{DateTime, Utc};

use crate::pg::Postgres;
use crate::{
    Action, ActionAttempt, AttemptNext, Claimed, GrantCreated, GrantRequest, GrantRequestStatus,
    HandlerRecord, HandlerSecrets, NewGrant, NewGrantRequest, NewHandler, NextDispatch, Outcome,
    StoreError,
};

fn todo(what: &str) -> StoreError {
    StoreError::Unavailable(format!("{what} is not yet available on Postgres"))
}

#[allow(unused_variables, missing_docs, clippy::unused_async)]
impl Postgres {
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
}
