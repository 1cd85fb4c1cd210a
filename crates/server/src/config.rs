//! Settings, layered: built-in defaults, then the config file, then
//! `ACTIONGATE_*` environment variables, then command-line flags.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use actiongate_store::Durability;
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

pub use crate::config_events::{EventsSettings, WebhookSettings, WebhookTimings};

/// The config file read when `--config` is not given and it exists.
pub const DEFAULT_CONFIG_PATH: &str = "config/actiongate.toml";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Everything the daemon can be told.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Directory of the database and the first admin key.
    pub data_dir: PathBuf,
    /// Log line format.
    pub log_format: LogFormat,
    /// Log filter (tracing `EnvFilter` syntax).
    pub log_level: String,
    /// Policy settings.
    pub policy: PolicySettings,
    /// Action settings.
    pub actions: ActionSettings,
    /// Storage settings.
    pub storage: StorageSettings,
    /// HTTP settings.
    pub http: HttpSettings,
    /// Event streams and retention.
    pub events: EventsSettings,
    /// Outbound notification webhooks.
    pub webhooks: WebhookSettings,
    /// Dispatch of approved handler actions to executors.
    pub dispatch: DispatchSettings,
}

/// How approved handler actions reach their executors.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DispatchSettings {
    /// Whether approved handler actions are sent at all; `false` pauses
    /// dispatch (they stay approved and go out once it is turned back on).
    pub enabled: bool,
    /// Attempts in flight at once, over all handlers.
    pub max_in_flight: usize,
    /// Attempts in flight at once to one handler.
    pub per_handler_max_in_flight: usize,
    /// Per-attempt timeout of handlers that name none.
    pub default_timeout: String,
    /// Waits before each retry; its length + 1 is the number of attempts.
    pub retry_schedule: Vec<String>,
    /// How long an executor that answered 202 has to post the result.
    pub async_result_timeout: String,
    /// Largest executor answer kept as the result, in bytes.
    pub result_max_bytes: usize,
    /// How long a rotated-out handler secret stays valid.
    pub secret_grace: String,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        DispatchSettings {
            enabled: true,
            max_in_flight: 256,
            per_handler_max_in_flight: 32,
            default_timeout: "30s".to_owned(),
            retry_schedule: ["1s", "5s", "30s", "2m", "10m"].map(str::to_owned).to_vec(),
            async_result_timeout: "1h".to_owned(),
            result_max_bytes: 256 * 1024,
            secret_grace: "24h".to_owned(),
        }
    }
}

/// [`DispatchSettings`] with durations parsed.
#[derive(Debug, Clone)]
pub struct Dispatch {
    /// See [`DispatchSettings::max_in_flight`].
    pub max_in_flight: usize,
    /// See [`DispatchSettings::per_handler_max_in_flight`].
    pub per_handler_max_in_flight: usize,
    /// See [`DispatchSettings::default_timeout`].
    pub default_timeout: Duration,
    /// See [`DispatchSettings::retry_schedule`].
    pub retry_schedule: Vec<Duration>,
    /// See [`DispatchSettings::async_result_timeout`].
    pub async_result_timeout: Duration,
    /// See [`DispatchSettings::result_max_bytes`].
    pub result_max_bytes: usize,
    /// See [`DispatchSettings::secret_grace`].
    pub secret_grace: Duration,
}

impl DispatchSettings {
    /// Parses the durations.
    pub fn parsed(&self) -> anyhow::Result<Dispatch> {
        let p = |name: &str, v: &str| {
            actiongate_policy::parse_duration(v)
                .map_err(|e| anyhow::anyhow!("dispatch.{name}: {e}"))
        };
        if self.max_in_flight == 0 || self.per_handler_max_in_flight == 0 {
            anyhow::bail!("dispatch: in-flight limits must be at least 1");
        }
        Ok(Dispatch {
            max_in_flight: self.max_in_flight,
            per_handler_max_in_flight: self.per_handler_max_in_flight,
            default_timeout: p("default_timeout", &self.default_timeout)?,
            retry_schedule: self
                .retry_schedule
                .iter()
                .map(|s| p("retry_schedule", s))
                .collect::<anyhow::Result<_>>()?,
            async_result_timeout: p("async_result_timeout", &self.async_result_timeout)?,
            result_max_bytes: self.result_max_bytes,
            secret_grace: p("secret_grace", &self.secret_grace)?,
        })
    }
}

/// How decisions are made.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicySettings {
    /// Profile of agents that have none: a preset name or `{allow, ask, deny}`.
    pub default_profile: serde_json::Value,
    /// IANA time zone in which `today` ends.
    pub time_zone: String,
}

/// Bounds on requests for actions.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ActionSettings {
    /// How long a human has when the request names no `timeout`.
    pub default_timeout: String,
    /// Shortest `timeout` accepted.
    pub min_timeout: String,
    /// Longest `timeout` accepted.
    pub max_timeout: String,
    /// Longest `?wait=` in seconds.
    pub max_wait_seconds: u64,
}

/// Database settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageSettings {
    /// `full` (survives power loss) or `normal` (survives process crashes).
    pub durability: Durability,
    /// Most writes that share one commit.
    pub batch_max: usize,
    /// How long the writer waits for more writes to join a commit when
    /// several arrived together, e.g. `200us`; `0s` commits at once. Unset:
    /// [`StorageSettings::commit_delay`] picks it by durability.
    pub commit_delay: Option<String>,
    /// Read-only connections.
    pub read_connections: u32,
    /// A CPU for the writer alone: the writer's thread runs on it and every
    /// other thread of `serve` stays off it (Linux). Unset: the kernel
    /// places every thread.
    pub writer_cpu: Option<usize>,
}

impl StorageSettings {
    /// [`StorageSettings::commit_delay`], at most 100ms; unset, the one
    /// that suits the durability ([`Durability::commit_delay`]).
    pub fn commit_delay(&self) -> anyhow::Result<Duration> {
        let Some(text) = &self.commit_delay else {
            return Ok(self.durability.commit_delay());
        };
        let d = match text.trim() {
            "0" | "0s" | "0ms" | "0us" => Duration::ZERO,
            other => actiongate_policy::parse_duration(other)
                .map_err(|e| anyhow::anyhow!("storage.commit_delay: {e}"))?,
        };
        if d > Duration::from_millis(100) {
            anyhow::bail!("storage.commit_delay: at most 100ms (got {text})");
        }
        Ok(d)
    }
}

/// HTTP server settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSettings {
    /// Largest request body in bytes.
    pub body_limit_bytes: usize,
    /// How long graceful shutdown waits for open requests, in seconds.
    pub shutdown_grace_seconds: u64,
    /// Seconds between MCP progress notifications while a tool call waits
    /// for a human (1-30: clients cut calls that stay silent too long).
    pub mcp_progress_seconds: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./data"),
            log_format: LogFormat::Text,
            log_level: "info".to_owned(),
            policy: PolicySettings::default(),
            actions: ActionSettings::default(),
            storage: StorageSettings::default(),
            http: HttpSettings::default(),
            dispatch: DispatchSettings::default(),
            events: EventsSettings::default(),
            webhooks: WebhookSettings::default(),
        }
    }
}

impl Default for PolicySettings {
    fn default() -> Self {
        PolicySettings {
            default_profile: serde_json::Value::String("guarded".to_owned()),
            time_zone: "UTC".to_owned(),
        }
    }
}

impl Default for ActionSettings {
    fn default() -> Self {
        ActionSettings {
            default_timeout: "15m".to_owned(),
            min_timeout: "1m".to_owned(),
            max_timeout: "60m".to_owned(),
            max_wait_seconds: 60,
        }
    }
}

impl Default for StorageSettings {
    fn default() -> Self {
        StorageSettings {
            durability: Durability::Full,
            batch_max: 128,
            commit_delay: None,
            read_connections: 4,
            writer_cpu: None,
        }
    }
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            body_limit_bytes: 1024 * 1024,
            shutdown_grace_seconds: 10,
            mcp_progress_seconds: 20,
        }
    }
}

/// Flags that override every other layer.
#[derive(Debug, Default, Clone, Serialize)]
pub struct FlagOverrides {
    /// `--listen`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// `--data-dir`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// `--log-format`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_format: Option<LogFormat>,
}

/// `ACTIONGATE_*` variables that are not settings: read by the client
/// commands (`URL`, `KEY`), by clap (`CONFIG`) or by logging (`LOG`).
const NOT_SETTINGS: &[&str] = &["url", "key", "config", "log"];

impl Settings {
    /// Loads the layers. `config` is `--config`; without it the default
    /// file is read when present.
    pub fn load(config: Option<&Path>, flags: &FlagOverrides) -> anyhow::Result<Settings> {
        let mut fig = Figment::from(Serialized::defaults(Settings::default()));
        match config {
            Some(path) => {
                if !path.exists() {
                    anyhow::bail!("config file {} does not exist", path.display());
                }
                fig = fig.merge(Toml::file_exact(path));
            }
            None if Path::new(DEFAULT_CONFIG_PATH).exists() => {
                fig = fig.merge(Toml::file_exact(DEFAULT_CONFIG_PATH));
            }
            None => {}
        }
        fig = fig
            .merge(
                Env::prefixed("ACTIONGATE_")
                    .split("__")
                    .filter(|k| !NOT_SETTINGS.iter().any(|n| k == *n)),
            )
            .merge(Serialized::defaults(flags));
        let settings: Settings = fig
            .extract()
            .map_err(|e| anyhow::anyhow!("invalid settings: {e}"))?;
        settings.validate()?;
        Ok(settings)
    }

    /// Checks what types alone cannot.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.time_zone()?;
        self.dispatch.parsed()?;
        let (min, max, default) = self.timeouts()?;
        if min > max || default < min || default > max {
            anyhow::bail!("actions: need min_timeout <= default_timeout <= max_timeout");
        }
        self.default_profile()?;
        self.storage.commit_delay()?;
        self.events.check()?;
        self.webhooks.check()?;
        if !(1..=30).contains(&self.http.mcp_progress_seconds) {
            anyhow::bail!("http.mcp_progress_seconds: must be 1-30");
        }
        Ok(())
    }

    /// The profile of agents with none of their own, compiled.
    pub fn default_profile(&self) -> anyhow::Result<actiongate_policy::Profile> {
        actiongate_policy::Profile::from_spec(serde_json::from_value(
            self.policy.default_profile.clone(),
        )?)
        .map_err(|e| anyhow::anyhow!("policy.default_profile: {e}"))
    }

    /// The configured time zone.
    pub fn time_zone(&self) -> anyhow::Result<chrono_tz::Tz> {
        self.policy.time_zone.parse().map_err(|_| {
            anyhow::anyhow!(
                "policy.time_zone: unknown IANA time zone '{}'",
                self.policy.time_zone
            )
        })
    }

    /// `(min, max, default)` timeouts.
    pub fn timeouts(&self) -> anyhow::Result<(Duration, Duration, Duration)> {
        let p = |name: &str, v: &str| {
            actiongate_policy::parse_duration(v).map_err(|e| anyhow::anyhow!("actions.{name}: {e}"))
        };
        Ok((
            p("min_timeout", &self.actions.min_timeout)?,
            p("max_timeout", &self.actions.max_timeout)?,
            p("default_timeout", &self.actions.default_timeout)?,
        ))
    }

    /// What the gate is told: every duration parsed, the default profile
    /// compiled.
    pub fn gate_config(&self) -> anyhow::Result<actiongate_gate::GateConfig> {
        let (min_timeout, max_timeout, default_timeout) = self.timeouts()?;
        let d = self.dispatch.parsed()?;
        let w = self.webhooks.timings()?;
        Ok(actiongate_gate::GateConfig {
            tz: self.time_zone()?,
            min_timeout,
            max_timeout,
            default_timeout,
            max_wait: Duration::from_secs(self.actions.max_wait_seconds),
            default_profile: std::sync::Arc::new(self.default_profile()?),
            dispatch: actiongate_gate::DispatchConfig {
                max_in_flight: d.max_in_flight,
                per_handler_max_in_flight: d.per_handler_max_in_flight,
                default_timeout: d.default_timeout,
                retry_schedule: d.retry_schedule,
                async_result_timeout: d.async_result_timeout,
                result_max_bytes: d.result_max_bytes,
                secret_grace: d.secret_grace,
            },
            dispatch_enabled: self.dispatch.enabled,
            notify: actiongate_gate::NotifyConfig {
                timeout: w.timeout,
                backoff_min: w.backoff_min,
                backoff_max: w.backoff_max,
                give_up_after: w.give_up_after,
                concurrency: self.webhooks.concurrency,
            },
            retention: self.events.retention()?,
            prune_interval: self.events.prune_interval()?,
        })
    }

    /// Path of the SQLite database file.
    pub fn database_path(&self) -> PathBuf {
        self.data_dir.join("actiongate.db")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn commit_delay_defaults_by_durability_and_a_given_one_wins() {
        let storage = |durability, commit_delay: Option<&str>| StorageSettings {
            durability,
            commit_delay: commit_delay.map(str::to_owned),
            ..StorageSettings::default()
        };
        let delay = |s: StorageSettings| s.commit_delay().unwrap();
        assert_eq!(delay(storage(Durability::Full, None)), Duration::ZERO);
        assert_eq!(
            delay(storage(Durability::Normal, None)),
            Duration::from_micros(200)
        );
        assert_eq!(
            delay(storage(Durability::Full, Some("300us"))),
            Duration::from_micros(300)
        );
        assert_eq!(
            delay(storage(Durability::Normal, Some("0s"))),
            Duration::ZERO
        );
        let err = storage(Durability::Full, Some("1s"))
            .commit_delay()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "storage.commit_delay: at most 100ms (got 1s)"
        );
    }
}
