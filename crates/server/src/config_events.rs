//! The `[events]`, `[records]` and `[webhooks]` settings: event streams,
//! retention of the event log and of settled records, and outbound
//! notification webhooks.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config_duration::{Dur, Every, Keep};

/// Event streams (SSE) and retention of the event log.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EventsSettings {
    /// A comment line is sent on idle streams this often.
    pub heartbeat: Dur,
    /// The `retry:` hint: how long clients wait before reconnecting.
    pub retry: Dur,
    /// How long events are kept, e.g. `30d`; `forever` keeps them all.
    pub retention: Keep,
    /// How often old events are pruned.
    pub prune_interval: Dur,
    /// A client whose connection takes no bytes for this long (a stalled
    /// stream subscriber) is disconnected; it resumes from its last id.
    pub send_timeout: Dur,
    /// How many batches of events (at least as many events) a stream may
    /// fall behind before it is closed (the client resumes from its last id).
    pub buffer: usize,
    /// Most bytes of rendered events held for streams that have not taken
    /// them yet, all streams together; past it, streams that fell that far
    /// behind are closed (their clients resume from their last id). Bounds
    /// what clients that stop reading pin until `send_timeout`.
    pub buffer_bytes: usize,
    /// While events keep coming, streams are sent at most one batch per
    /// gap, so each wakes and writes once per gap, not once per event; an
    /// event after a quiet period goes out at once. The gap is
    /// `coalesce_per_stream` per open stream, at most this. `0s`: every
    /// commit's events at once.
    pub coalesce: Dur,
    /// The gap's share per open stream (see `coalesce`).
    pub coalesce_per_stream: Dur,
    /// How often the daemon appends a signed `audit.anchor` event (when
    /// events were written since the last); `off` writes none.
    pub audit_anchor_interval: Every,
}

impl Default for EventsSettings {
    fn default() -> Self {
        EventsSettings {
            heartbeat: Dur::secs(15),
            retry: Dur::secs(3),
            retention: Keep::For(Dur::secs(30 * 86400)),
            prune_interval: Dur::secs(3600),
            send_timeout: Dur::secs(30),
            buffer: 4096,
            buffer_bytes: 32 * 1024 * 1024,
            coalesce: Dur::millis(20),
            coalesce_per_stream: Dur::micros(20),
            audit_anchor_interval: Every::Each(Dur::secs(600)),
        }
    }
}

/// Fails naming `section.name` when `d` is zero.
fn nonzero(section: &str, name: &str, d: Dur) -> anyhow::Result<Duration> {
    if d.get().is_zero() {
        anyhow::bail!("{section}.{name}: must be more than 0s");
    }
    Ok(d.get())
}

impl EventsSettings {
    /// Checks what the types alone cannot.
    pub fn check(&self) -> anyhow::Result<()> {
        nonzero("events", "heartbeat", self.heartbeat)?;
        nonzero("events", "retry", self.retry)?;
        nonzero("events", "prune_interval", self.prune_interval)?;
        nonzero("events", "send_timeout", self.send_timeout)?;
        if let Keep::For(d) = self.retention {
            nonzero("events", "retention", d)?;
        }
        if self.buffer_bytes < 1024 * 1024 {
            anyhow::bail!("events.buffer_bytes: must be at least 1048576 (1 MiB)");
        }
        for (name, d) in [
            ("coalesce", self.coalesce),
            ("coalesce_per_stream", self.coalesce_per_stream),
        ] {
            if d.get() > Duration::from_secs(5) {
                anyhow::bail!("events.{name}: at most 5s (got {d})");
            }
        }
        if let Every::Each(d) = self.audit_anchor_interval {
            nonzero("events", "audit_anchor_interval", d)?;
        }
        Ok(())
    }

    /// See [`EventsSettings::audit_anchor_interval`]; `None` when `off`.
    pub fn audit_anchor_interval(&self) -> Option<Duration> {
        self.audit_anchor_interval.get()
    }

    /// How far event streams may fall behind.
    pub fn window(&self) -> crate::sse::Window {
        crate::sse::Window {
            batches: self.buffer,
            bytes: self.buffer_bytes,
        }
    }

    /// How long the event hub gathers events between two batches.
    pub fn coalesce(&self) -> crate::sse::Coalesce {
        crate::sse::Coalesce {
            per_stream: self.coalesce_per_stream.get(),
            max: self.coalesce.get(),
        }
    }

    /// Retention; `None` keeps events forever.
    pub fn retention(&self) -> Option<Duration> {
        match self.retention {
            Keep::Forever => None,
            Keep::For(d) => Some(d.get()),
        }
    }
}

/// Retention of settled records.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecordsSettings {
    /// How long settled records are kept, e.g. `90d`: actions settled,
    /// grant requests and plans decided or expired, sessions ended untainted
    /// that nothing refers to, grants revoked or expired, and webhook
    /// deliveries done, before this are deleted (checked with the events'
    /// pruning; see docs/operations.md); `forever` keeps them all.
    pub retention: Keep,
    /// How long a session that was tainted is kept once ended and nothing
    /// refers to it (its id used again meanwhile, by a runtime resuming
    /// its conversation, is still tainted): at least `retention`; by
    /// default 365 days, or `retention` when longer; `forever` keeps them
    /// all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tainted_sessions: Option<Keep>,
}

/// How long tainted sessions are kept when `records.tainted_sessions` is
/// not set and `records.retention` is shorter.
const TAINTED_SESSIONS: Duration = Duration::from_secs(365 * 86400);

impl Default for RecordsSettings {
    fn default() -> Self {
        RecordsSettings {
            retention: Keep::For(Dur::secs(90 * 86400)),
            tainted_sessions: None,
        }
    }
}

impl RecordsSettings {
    /// Checks what the types alone cannot.
    pub fn check(&self) -> anyhow::Result<()> {
        if let Keep::For(d) = self.retention {
            nonzero("records", "retention", d)?;
        }
        let Some(tainted) = self.tainted_sessions else {
            return Ok(());
        };
        if let Keep::For(d) = tainted {
            nonzero("records", "tainted_sessions", d)?;
        }
        let shorter = match (self.retention(), tainted.duration()) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(all), Some(tainted)) => tainted < all,
        };
        if shorter {
            anyhow::bail!(
                "records.tainted_sessions: must be at least records.retention: a tainted session \
                 is kept no shorter than an untainted one"
            );
        }
        Ok(())
    }

    /// Retention; `None` keeps records forever.
    pub fn retention(&self) -> Option<Duration> {
        self.retention.duration()
    }

    /// Retention of ended tainted sessions; `None` keeps them forever.
    pub fn tainted_sessions(&self) -> Option<Duration> {
        match self.tainted_sessions {
            Some(keep) => keep.duration(),
            None => self.retention().map(|all| all.max(TAINTED_SESSIONS)),
        }
    }
}

/// Outbound notification webhooks.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhookSettings {
    /// How long one attempt may take.
    pub timeout: Dur,
    /// Delay before the first retry; it doubles with every attempt.
    pub backoff_min: Dur,
    /// Longest delay between attempts.
    pub backoff_max: Dur,
    /// A delivery still failing this long after its event is given up.
    pub give_up_after: Dur,
    /// Most attempts in flight at once.
    pub concurrency: usize,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        WebhookSettings {
            timeout: Dur::secs(10),
            backoff_min: Dur::secs(1),
            backoff_max: Dur::secs(300),
            give_up_after: Dur::secs(3 * 86400),
            concurrency: 16,
        }
    }
}

impl WebhookSettings {
    /// Checks what the types alone cannot.
    pub fn check(&self) -> anyhow::Result<()> {
        nonzero("webhooks", "timeout", self.timeout)?;
        nonzero("webhooks", "backoff_min", self.backoff_min)?;
        nonzero("webhooks", "give_up_after", self.give_up_after)?;
        if self.backoff_min > self.backoff_max {
            anyhow::bail!("webhooks: need backoff_min <= backoff_max");
        }
        if self.concurrency == 0 {
            anyhow::bail!("webhooks.concurrency: must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn records(retention: Keep, tainted: Option<Keep>) -> RecordsSettings {
        RecordsSettings {
            retention,
            tainted_sessions: tainted,
        }
    }

    fn days(n: u64) -> Keep {
        Keep::For(Dur::secs(n * 86400))
    }

    const DAY: u64 = 86400;

    /// Tainted sessions are kept 365 days unless set, never shorter than
    /// the other records, and a setting shorter than those is refused.
    #[test]
    fn tainted_sessions_are_kept_at_least_as_long_as_records() {
        let default = RecordsSettings::default();
        assert_eq!(
            default.tainted_sessions(),
            Some(Duration::from_secs(365 * DAY))
        );
        let longer = records(days(400), None);
        assert_eq!(
            longer.tainted_sessions(),
            Some(Duration::from_secs(400 * DAY))
        );
        let forever = records(Keep::Forever, None);
        assert_eq!(forever.tainted_sessions(), None);
        forever.check().unwrap();
        let set = records(days(90), Some(days(120)));
        set.check().unwrap();
        assert_eq!(set.tainted_sessions(), Some(Duration::from_secs(120 * DAY)));
        for shorter in [
            records(days(90), Some(days(30))),
            records(Keep::Forever, Some(days(400))),
        ] {
            let err = shorter.check().unwrap_err().to_string();
            assert!(err.starts_with("records.tainted_sessions:"), "{err}");
        }
        let zero = records(days(90), Some(Keep::For(Dur::secs(0))));
        assert!(
            zero.check()
                .unwrap_err()
                .to_string()
                .contains("records.tainted_sessions")
        );
    }
}
