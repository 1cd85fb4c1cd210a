//! The `[events]` and `[webhooks]` settings: event streams, retention of the
//! event log, and outbound notification webhooks.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Event streams (SSE) and retention of the event log.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EventsSettings {
    /// A comment line is sent on idle streams this often.
    pub heartbeat: String,
    /// The `retry:` hint: how long clients wait before reconnecting.
    pub retry: String,
    /// How long events are kept, e.g. `30d`; `forever` keeps them all.
    pub retention: String,
    /// How often old events are pruned.
    pub prune_interval: String,
    /// A client whose connection takes no bytes for this long (a stalled
    /// stream subscriber) is disconnected; it resumes from its last id.
    pub send_timeout: String,
    /// How many batches of events (at least as many events) a stream may
    /// fall behind before it is closed (the client resumes from its last id).
    pub buffer: usize,
    /// While events keep coming, streams are sent at most one batch per
    /// gap, so each wakes and writes once per gap, not once per event; an
    /// event after a quiet period goes out at once. The gap is
    /// `coalesce_per_stream` per open stream, at most this. `0s`: every
    /// commit's events at once.
    pub coalesce: String,
    /// The gap's share per open stream (see `coalesce`).
    pub coalesce_per_stream: String,
    /// How often the daemon appends a signed `audit.anchor` event (when
    /// events were written since the last); `off` writes none.
    pub audit_anchor_interval: String,
}

impl Default for EventsSettings {
    fn default() -> Self {
        EventsSettings {
            heartbeat: "15s".to_owned(),
            retry: "3s".to_owned(),
            retention: "30d".to_owned(),
            prune_interval: "1h".to_owned(),
            send_timeout: "30s".to_owned(),
            buffer: 4096,
            coalesce: "20ms".to_owned(),
            coalesce_per_stream: "20us".to_owned(),
            audit_anchor_interval: "10m".to_owned(),
        }
    }
}

fn duration(section: &str, name: &str, value: &str) -> anyhow::Result<Duration> {
    actiongate_policy::parse_duration(value).map_err(|e| anyhow::anyhow!("{section}.{name}: {e}"))
}

impl EventsSettings {
    /// Checks every value parses.
    pub fn check(&self) -> anyhow::Result<()> {
        self.heartbeat()?;
        self.retry()?;
        self.retention()?;
        self.prune_interval()?;
        self.send_timeout()?;
        self.coalesce()?;
        self.audit_anchor_interval()?;
        Ok(())
    }

    /// See [`EventsSettings::audit_anchor_interval`]; `None` when `off`.
    pub fn audit_anchor_interval(&self) -> anyhow::Result<Option<Duration>> {
        match self.audit_anchor_interval.trim() {
            "off" => Ok(None),
            other => duration("events", "audit_anchor_interval", other).map(Some),
        }
    }

    /// How long the event hub gathers events between two batches.
    pub fn coalesce(&self) -> anyhow::Result<crate::sse::Coalesce> {
        let short = |name: &str, value: &str| match value.trim() {
            "0" | "0s" | "0ms" => Ok(Duration::ZERO),
            other => {
                let d = duration("events", name, other)?;
                if d > Duration::from_secs(5) {
                    anyhow::bail!("events.{name}: at most 5s (got {other})");
                }
                Ok(d)
            }
        };
        Ok(crate::sse::Coalesce {
            per_stream: short("coalesce_per_stream", &self.coalesce_per_stream)?,
            max: short("coalesce", &self.coalesce)?,
        })
    }

    /// Heartbeat period.
    pub fn heartbeat(&self) -> anyhow::Result<Duration> {
        duration("events", "heartbeat", &self.heartbeat)
    }

    /// Reconnect hint.
    pub fn retry(&self) -> anyhow::Result<Duration> {
        duration("events", "retry", &self.retry)
    }

    /// Retention; `None` keeps events forever.
    pub fn retention(&self) -> anyhow::Result<Option<Duration>> {
        match self.retention.trim() {
            "forever" | "indefinite" => Ok(None),
            other => duration("events", "retention", other).map(Some),
        }
    }

    /// Pruning period.
    pub fn prune_interval(&self) -> anyhow::Result<Duration> {
        duration("events", "prune_interval", &self.prune_interval)
    }

    /// Stalled-connection cutoff.
    pub fn send_timeout(&self) -> anyhow::Result<Duration> {
        duration("events", "send_timeout", &self.send_timeout)
    }
}

/// Outbound notification webhooks.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhookSettings {
    /// How long one attempt may take.
    pub timeout: String,
    /// Delay before the first retry; it doubles with every attempt.
    pub backoff_min: String,
    /// Longest delay between attempts.
    pub backoff_max: String,
    /// A delivery still failing this long after its event is given up.
    pub give_up_after: String,
    /// Most attempts in flight at once.
    pub concurrency: usize,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        WebhookSettings {
            timeout: "10s".to_owned(),
            backoff_min: "1s".to_owned(),
            backoff_max: "5m".to_owned(),
            give_up_after: "3d".to_owned(),
            concurrency: 16,
        }
    }
}

/// [`WebhookSettings`] parsed.
#[derive(Debug, Clone, Copy)]
pub struct WebhookTimings {
    /// Per attempt.
    pub timeout: Duration,
    /// First retry delay.
    pub backoff_min: Duration,
    /// Cap of the delay.
    pub backoff_max: Duration,
    /// Age at which a delivery is given up.
    pub give_up_after: Duration,
}

impl WebhookSettings {
    /// Checks every value.
    pub fn check(&self) -> anyhow::Result<()> {
        let t = self.timings()?;
        if t.backoff_min > t.backoff_max {
            anyhow::bail!("webhooks: need backoff_min <= backoff_max");
        }
        if self.concurrency == 0 {
            anyhow::bail!("webhooks.concurrency: must be at least 1");
        }
        Ok(())
    }

    /// The durations.
    pub fn timings(&self) -> anyhow::Result<WebhookTimings> {
        Ok(WebhookTimings {
            timeout: duration("webhooks", "timeout", &self.timeout)?,
            backoff_min: duration("webhooks", "backoff_min", &self.backoff_min)?,
            backoff_max: duration("webhooks", "backoff_max", &self.backoff_max)?,
            give_up_after: duration("webhooks", "give_up_after", &self.give_up_after)?,
        })
    }
}
