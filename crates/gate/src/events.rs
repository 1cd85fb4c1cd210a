//! The event log as adapters read it: follow what is committed, replay
//! what was, and the audit chain's anchor. Read-only; every event is
//! written by the workflow whose change it records.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::broadcast;

use actiongate_store::audit::Anchor;
use actiongate_store::{Event, Store, WriteStats};
pub use actiongate_store::{TypeFilter, next_events_page};

use crate::{Gate, GateResult};

/// Read access to the event log, cheap to clone and given to the tasks
/// that stream it (SSE, the audit export) instead of the whole gate.
#[derive(Clone)]
pub struct EventLog {
    store: Store,
}

impl EventLog {
    /// Events committed from now on, in `seq` order.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.store.subscribe()
    }

    /// The newest `seq` published by this daemon.
    pub fn last_seq(&self) -> i64 {
        self.store.last_seq()
    }

    /// The newest `seq` committed (by anyone).
    pub async fn newest_seq(&self) -> GateResult<i64> {
        Ok(self.store.newest_seq().await?)
    }

    /// Up to `limit` events after `seq`, oldest first; only `agent`'s when given.
    pub async fn events_after(
        &self,
        seq: i64,
        agent: Option<&str>,
        limit: i64,
    ) -> GateResult<Vec<Event>> {
        Ok(self.store.events_after(seq, agent, limit).await?)
    }

    /// Every event of one action, oldest first.
    pub async fn action_events(&self, action_id: &str) -> GateResult<Vec<Event>> {
        Ok(self.store.action_events(action_id).await?)
    }

    /// Where the audit chain starts now (pruning moves it).
    pub async fn audit_anchor(&self) -> GateResult<Anchor> {
        Ok(self.store.audit_anchor().await?)
    }

    /// The key that signs audit anchors and export end lines, if any.
    pub fn audit_key(&self) -> Option<&actiongate_store::anchor::AuditKey> {
        self.store.audit_key()
    }

    /// The first `seq` written at or after `at`.
    pub async fn first_seq_since(&self, at: DateTime<Utc>) -> GateResult<Option<i64>> {
        Ok(self.store.first_seq_since(at).await?)
    }
}

/// How the daemon is doing, for readiness and metrics.
impl Gate {
    /// The event log.
    pub fn event_log(&self) -> EventLog {
        EventLog {
            store: self.store().clone(),
        }
    }

    /// Whether the database answers and is migrated.
    pub async fn ready(&self) -> GateResult<()> {
        Ok(self.store().ready().await?)
    }

    /// Pending actions, grant requests and plans, all agents.
    pub async fn pending_counts(&self) -> GateResult<actiongate_store::PendingCounts> {
        Ok(self.store().pending_counts().await?)
    }

    /// Commits and writes so far.
    pub fn write_stats(&self) -> WriteStats {
        self.store().write_stats()
    }
}
