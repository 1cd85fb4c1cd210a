//! Outbound notification subscriptions and their deliveries, as shown.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// An outbound notification webhook (never shows its secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Subscription {
    /// Its id.
    pub id: String,
    /// Where events are POSTed.
    pub url: String,
    /// The event types sent: names, `prefix.*` patterns, or `*`.
    pub types: Vec<String>,
    /// What it is for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When it was created; only events after this are sent.
    pub created_at: DateTime<Utc>,
    /// Escalation tier: 1 is sent every event `types` match; 2 only
    /// `action.escalated` (`docs/teams.md`).
    #[serde(default = "tier_one")]
    pub tier: u8,
}

fn tier_one() -> u8 {
    1
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Not yet accepted by the receiver; retried at `next_attempt_at`.
    Pending,
    /// The receiver answered 2xx.
    Delivered,
    /// Given up: a non-retryable answer, or retried for too long.
    Failed,
}

impl DeliveryStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }
}

impl FromStr for DeliveryStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<DeliveryStatus, String> {
        match s {
            "pending" => Ok(DeliveryStatus::Pending),
            "delivered" => Ok(DeliveryStatus::Delivered),
            "failed" => Ok(DeliveryStatus::Failed),
            other => Err(format!("unknown delivery status '{other}'")),
        }
    }
}

/// One try at a delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeliveryAttempt {
    /// 1 for the first try.
    pub attempt: i64,
    /// When it started.
    pub at: DateTime<Utc>,
    /// The receiver's HTTP status, when it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_code: Option<i64>,
    /// Why it failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long it took.
    pub duration_ms: i64,
}

/// One event owed to one subscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Delivery {
    /// Its id.
    pub id: String,
    /// The subscription.
    pub subscription_id: String,
    /// The event's seq.
    pub event_seq: i64,
    /// The event's id, sent as `webhook-id` on every attempt.
    pub event_id: String,
    /// The event's type.
    pub event_type: String,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts so far.
    pub attempts: i64,
    /// When the next attempt is due, while pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When the event was put in the outbox.
    pub created_at: DateTime<Utc>,
    /// When it was delivered or given up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// The last failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Every attempt, oldest first.
    pub attempt_log: Vec<DeliveryAttempt>,
}
