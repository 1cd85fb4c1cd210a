//! Settings, layered: built-in defaults, then the config file, then
//! `ACTIONGATE_*` environment variables, then command-line flags.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use actiongate_gate::storage::{Durability, PgOptions, Target};
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

pub use crate::config_connectors::{
    ConnectorsSettings, DiscordMode, DiscordSettings, SlackSettings, TelegramMode,
    TelegramSettings, WhatsAppSettings,
};
pub use crate::config_duration::{Dur, Keep};
pub use crate::config_events::{EventsSettings, WebhookSettings};
pub use crate::config_limits::{LimitsSettings, OutboundSettings};

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
    /// Chat connectors (Telegram, Slack, Discord, WhatsApp).
    pub connectors: ConnectorsSettings,
    /// The `/metrics` endpoint.
    pub metrics: MetricsSettings,
    /// What one agent may hold and send.
    pub limits: LimitsSettings,
    /// Where outbound requests may go.
    pub outbound: OutboundSettings,
    /// Sessions' idle timeout.
    pub sessions: crate::config_sessions::SessionsSettings,
    /// Retention of settled records.
    pub records: crate::config_events::RecordsSettings,
}

/// Who may read `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricsAuth {
    /// Anyone who can reach the port (a scraper without a key).
    #[default]
    Open,
    /// Operator and admin keys only: 401 without a key, 403 for an agent's.
    Operator,
}

/// The `/metrics` endpoint's settings.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSettings {
    /// `open` (default) or `operator`.
    pub auth: MetricsAuth,
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
    pub default_timeout: Dur,
    /// Waits before each retry; its length + 1 is the number of attempts.
    pub retry_schedule: Vec<Dur>,
    /// How long an executor that answered 202 has to post the result.
    pub async_result_timeout: Dur,
    /// Largest executor answer kept as the result, in bytes.
    pub result_max_bytes: usize,
    /// How long a rotated-out handler secret stays valid.
    pub secret_grace: Dur,
    /// Added to an attempt's timeout to make its lease: past it, an attempt
    /// whose daemon went away is sent again, by any daemon on the database.
    pub lease_slack: Dur,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        DispatchSettings {
            enabled: true,
            max_in_flight: 256,
            per_handler_max_in_flight: 32,
            default_timeout: Dur::secs(30),
            retry_schedule: [1, 5, 30, 120, 600].map(Dur::secs).to_vec(),
            async_result_timeout: Dur::secs(3600),
            result_max_bytes: 256 * 1024,
            secret_grace: Dur::secs(24 * 3600),
            lease_slack: Dur::secs(30),
        }
    }
}

impl DispatchSettings {
    /// The dispatch settings as the gate takes them.
    pub fn config(&self) -> anyhow::Result<actiongate_gate::DispatchConfig> {
        if self.max_in_flight == 0 || self.per_handler_max_in_flight == 0 {
            anyhow::bail!("dispatch: in-flight limits must be at least 1");
        }
        if self.retry_schedule.iter().any(|d| d.get().is_zero()) {
            anyhow::bail!("dispatch.retry_schedule: every wait must be more than 0s");
        }
        Ok(actiongate_gate::DispatchConfig {
            max_in_flight: self.max_in_flight,
            per_handler_max_in_flight: self.per_handler_max_in_flight,
            default_timeout: nonzero("dispatch.default_timeout", self.default_timeout)?,
            retry_schedule: self.retry_schedule.iter().map(|d| d.get()).collect(),
            async_result_timeout: nonzero(
                "dispatch.async_result_timeout",
                self.async_result_timeout,
            )?,
            result_max_bytes: self.result_max_bytes,
            secret_grace: self.secret_grace.get(),
            lease_slack: nonzero("dispatch.lease_slack", self.lease_slack)?,
        })
    }
}

/// Fails naming `name` when `d` is zero.
fn nonzero(name: &str, d: Dur) -> anyhow::Result<Duration> {
    if d.get().is_zero() {
        anyhow::bail!("{name}: must be more than 0s");
    }
    Ok(d.get())
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
    pub default_timeout: Dur,
    /// Shortest `timeout` accepted.
    pub min_timeout: Dur,
    /// Longest `timeout` accepted.
    pub max_timeout: Dur,
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
    pub commit_delay: Option<Dur>,
    /// Read-only connections.
    pub read_connections: u32,
    /// A CPU for the writer alone: the writer's thread runs on it and every
    /// other thread of `serve` stays off it (Linux). Unset: the kernel
    /// places every thread.
    pub writer_cpu: Option<usize>,
    /// For tests only: SQLite's `max_page_count` (4 KiB pages), so a test
    /// can make the database "full" without filling a disk. Unset in
    /// production.
    pub test_max_page_count: Option<u64>,
    /// `postgres://user:password@host:port/db`: keep everything in this
    /// Postgres database, shared by every daemon given the same URL,
    /// instead of the SQLite file in the data dir. The settings above are
    /// SQLite's; the ones below, Postgres'.
    pub database_url: Option<String>,
    /// Most connections to Postgres this daemon opens.
    pub pool_size: u32,
    /// How long a request waits for a Postgres connection before it fails
    /// with 503.
    pub connect_timeout: Dur,
    /// Longest a Postgres statement may run before it is cancelled (503).
    pub statement_timeout: Dur,
    /// Longest this daemon goes without reading the shared event log when
    /// no notification arrives (at most 1s).
    pub poll_interval: Dur,
}

/// `url` with its password (if any) replaced, for logs and errors.
pub fn redacted_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            if u.password().is_some() {
                let _ = u.set_password(Some("***"));
            }
            u.to_string()
        }
        Err(_) => "(unparsable URL)".to_owned(),
    }
}

impl StorageSettings {
    /// How to reach Postgres, when `database_url` is set.
    pub fn postgres(&self) -> Option<PgOptions> {
        let url = self.database_url.as_ref()?;
        Some(PgOptions {
            max_connections: self.pool_size,
            connect_timeout: self.connect_timeout.get(),
            statement_timeout: self.statement_timeout.get(),
            poll_interval: self.poll_interval.get(),
            ..PgOptions::new(url.clone())
        })
    }

    /// Checks the Postgres settings.
    fn check(&self) -> anyhow::Result<()> {
        if let Some(url) = &self.database_url
            && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
        {
            anyhow::bail!(
                "storage.database_url: must start with postgres:// (got {})",
                redacted_url(url)
            );
        }
        if !(2..=1000).contains(&self.pool_size) {
            anyhow::bail!("storage.pool_size: must be 2-1000");
        }
        if self.poll_interval.get() > Duration::from_secs(1) || self.poll_interval.get().is_zero() {
            anyhow::bail!("storage.poll_interval: more than 0s, at most 1s");
        }
        if self.connect_timeout.get().is_zero() || self.statement_timeout.get().is_zero() {
            anyhow::bail!("storage.connect_timeout and storage.statement_timeout: more than 0s");
        }
        Ok(())
    }

    /// [`StorageSettings::commit_delay`], at most 100ms; unset, the one
    /// that suits the durability ([`Durability::commit_delay`]).
    pub fn commit_delay(&self) -> anyhow::Result<Duration> {
        let Some(d) = self.commit_delay else {
            return Ok(self.durability.commit_delay());
        };
        if d.get() > Duration::from_millis(100) {
            anyhow::bail!("storage.commit_delay: at most 100ms (got {d})");
        }
        Ok(d.get())
    }
}

/// Whether `s` names a browser origin as `http.mcp_allowed_origins` takes
/// it: `null`, or `http`/`https`, a host and an optional port or `*`, with
/// no path, query or credentials.
fn is_origin(s: &str) -> bool {
    if s == "null" {
        return true;
    }
    let Some((scheme, rest)) = s.split_once("://") else {
        return false;
    };
    let rest = rest.strip_suffix(":*").unwrap_or(rest);
    let host_ok = !rest.is_empty()
        && !rest.contains(['/', '?', '#', '@', ' '])
        && rest.parse::<axum::http::uri::Authority>().is_ok();
    matches!(scheme, "http" | "https") && host_ok
}

/// HTTP server settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSettings {
    /// Largest request body in bytes.
    pub body_limit_bytes: usize,
    /// How long graceful shutdown waits for open requests, in seconds.
    pub shutdown_grace_seconds: u64,
    /// How long a client has to send a request's head (from connecting,
    /// or from the end of the last response on a kept-alive connection),
    /// and then as long for its body, in seconds (1-3600): past it the
    /// connection is closed, or the request answered 408.
    pub request_read_seconds: u64,
    /// Most client connections open at once; past it new ones wait in the
    /// kernel's queue until one closes. 0 (the default): half the file
    /// descriptors the daemon may open (it raises its soft limit to the
    /// hard one at start).
    pub max_connections: usize,
    /// Seconds between MCP progress notifications while a tool call waits
    /// for a human (1-30: clients cut calls that stay silent too long).
    pub mcp_progress_seconds: u64,
    /// How long a tool call of the handshake era whose stream the client
    /// dropped waits for the client to resume it (`Last-Event-ID`) before
    /// its pending item is withdrawn, in seconds (1-300).
    pub mcp_resume_seconds: u64,
    /// How long an MCP client of the stateless era may reuse the tool list
    /// before asking again (its `ttlMs` cache hint), in seconds (0-3600).
    pub mcp_tools_ttl_seconds: u64,
    /// The browser origins whose pages may call `/mcp`
    /// (`scheme://host[:port]`, `:*` for any port, or `null`). A request
    /// with any other `Origin` header gets 403; one without keeps working.
    /// Empty (the default): none.
    pub mcp_allowed_origins: Vec<String>,
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
            connectors: ConnectorsSettings::default(),
            metrics: MetricsSettings::default(),
            limits: LimitsSettings::default(),
            outbound: OutboundSettings::default(),
            sessions: Default::default(),
            records: Default::default(),
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
            default_timeout: Dur::secs(15 * 60),
            min_timeout: Dur::secs(60),
            max_timeout: Dur::secs(3600),
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
            test_max_page_count: None,
            database_url: None,
            pool_size: 16,
            connect_timeout: Dur::secs(5),
            statement_timeout: Dur::secs(10),
            poll_interval: Dur::millis(500),
        }
    }
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            body_limit_bytes: 1024 * 1024,
            shutdown_grace_seconds: 10,
            request_read_seconds: 30,
            max_connections: 0,
            mcp_progress_seconds: 20,
            mcp_resume_seconds: 10,
            mcp_tools_ttl_seconds: 10,
            mcp_allowed_origins: Vec::new(),
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
    /// `--database-url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageFlags>,
}

/// Storage settings given by flags.
#[derive(Debug, Clone, Serialize)]
pub struct StorageFlags {
    /// `--database-url`.
    pub database_url: String,
}

/// `ACTIONGATE_*` variables that are not settings: read by the client
/// commands (`URL`, `KEY`, `KEY_FILE`, `ADMIN_KEY`, `SESSION`), the hooks
/// (`HOOK_*`), `wrap` (`REAL_SHELL`, `WRAP_SESSION`), the MCP proxy
/// (`MCP_*`), the executor (`EXECUTOR_SECRET`), clap (`CONFIG`) or
/// logging (`LOG`). A shell that exported one for a client (as the docs
/// say to) still starts the daemon.
pub const NOT_SETTINGS: &[&str] = &[
    "url",
    "key",
    "key_file",
    "admin_key",
    "admin_key_file",
    "session",
    "config",
    "log",
    "hook_wait",
    "hook_defer",
    "hook_on_error",
    "hook_on_timeout",
    "real_shell",
    "wrap_session",
    "executor_secret",
    "mcp_max_message_bytes",
    "mcp_max_message_depth",
    "mcp_pins",
    "mcp_session",
    "mcp_upstream_timeout",
];

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
        self.dispatch.config()?;
        let (min, max, default) = self.timeouts()?;
        if min > max || default < min || default > max {
            anyhow::bail!("actions: need min_timeout <= default_timeout <= max_timeout");
        }
        self.default_profile()?;
        self.storage.commit_delay()?;
        self.storage.check()?;
        // Everything the gate is built from, before anything is made on
        // disk: a bad setting stops `serve` with no data dir or key made.
        self.sessions.idle_timeout()?;
        self.events.check()?;
        self.records.check()?;
        self.webhooks.check()?;
        self.connectors.check()?;
        self.limits.check()?;
        self.outbound.policy()?;
        if !(1..=3600).contains(&self.http.request_read_seconds) {
            anyhow::bail!("http.request_read_seconds: must be 1-3600");
        }
        if !(1..=30).contains(&self.http.mcp_progress_seconds) {
            anyhow::bail!("http.mcp_progress_seconds: must be 1-30");
        }
        if !(1..=300).contains(&self.http.mcp_resume_seconds) {
            anyhow::bail!("http.mcp_resume_seconds: must be 1-300");
        }
        if self.http.mcp_tools_ttl_seconds > 3600 {
            anyhow::bail!("http.mcp_tools_ttl_seconds: must be 0-3600");
        }
        for origin in &self.http.mcp_allowed_origins {
            if !is_origin(origin) {
                anyhow::bail!(
                    "http.mcp_allowed_origins: '{origin}' is not an origin \
                     (http://host[:port] or https://host[:port], :* for any port, or null)"
                );
            }
        }
        Ok(())
    }

    /// The profile of agents with none of their own, compiled.
    pub fn default_profile(&self) -> anyhow::Result<actiongate_policy::Profile> {
        let profile = actiongate_policy::Profile::from_spec(serde_json::from_value(
            self.policy.default_profile.clone(),
        )?)
        .map_err(|e| anyhow::anyhow!("policy.default_profile: {e}"))?;
        // A profile is refused unless it answers its own examples.
        let misses = actiongate_policy::examples::mismatches(&profile);
        if !misses.is_empty() {
            let list: Vec<String> = misses
                .iter()
                .map(|m| format!("policy.default_profile.{}: {m}", m.field))
                .collect();
            anyhow::bail!(
                "policy.default_profile does not answer its examples:\n  {}",
                list.join("\n  ")
            );
        }
        Ok(profile)
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
        Ok((
            nonzero("actions.min_timeout", self.actions.min_timeout)?,
            nonzero("actions.max_timeout", self.actions.max_timeout)?,
            nonzero("actions.default_timeout", self.actions.default_timeout)?,
        ))
    }

    /// What the gate is told: every duration parsed, the default profile
    /// compiled.
    pub fn gate_config(&self) -> anyhow::Result<actiongate_gate::GateConfig> {
        let (min_timeout, max_timeout, default_timeout) = self.timeouts()?;
        let w = &self.webhooks;
        Ok(actiongate_gate::GateConfig {
            tz: self.time_zone()?,
            min_timeout,
            max_timeout,
            default_timeout,
            max_wait: Duration::from_secs(self.actions.max_wait_seconds),
            default_profile: std::sync::Arc::new(self.default_profile()?),
            dispatch: self.dispatch.config()?,
            dispatch_enabled: self.dispatch.enabled,
            notify: actiongate_gate::NotifyConfig {
                timeout: w.timeout.get(),
                backoff_min: w.backoff_min.get(),
                backoff_max: w.backoff_max.get(),
                give_up_after: w.give_up_after.get(),
                concurrency: w.concurrency,
            },
            retention: self.events.retention(),
            records_retention: self.records.retention(),
            tainted_session_retention: self.records.tainted_sessions(),
            prune_interval: self.events.prune_interval.get(),
            json: self.limits.json(self.dispatch.result_max_bytes),
            max_pending_per_agent: self.limits.max_pending_per_agent,
            max_undecided_runs_per_minute: self.limits.max_undecided_runs_per_minute,
            max_request_bytes_per_agent_per_hour: self.limits.max_request_bytes_per_agent_per_hour,
            max_open_per_key: self.limits.max_open_per_key,
            max_in_flight_per_key: self.limits.max_in_flight_per_key,
            outbound: self.outbound.policy()?,
            session_idle: self.sessions.idle_timeout()?,
        })
    }

    /// The database: Postgres when `storage.database_url` is set, else the
    /// SQLite file in the data dir.
    pub fn storage_target(&self) -> Target {
        match self.storage.postgres() {
            Some(mut pg) => {
                // A node holds what it sends longer than sending can take
                // (else another node may send it too): one notification
                // attempt, or a batch of chat messages sent one by one.
                let margin = Duration::from_secs(30);
                pg.delivery_lease = self.webhooks.timeout.get() + margin;
                pg.chat_lease = self.connectors.batch_time() + margin;
                Target::Postgres(pg)
            }
            None => Target::Sqlite(self.database_path()),
        }
    }

    /// The database as logs and errors name it (a URL without its password).
    pub fn database_shown(&self) -> String {
        match &self.storage.database_url {
            Some(url) => redacted_url(url),
            None => self.database_path().display().to_string(),
        }
    }

    /// Path of the SQLite database file.
    pub fn database_path(&self) -> PathBuf {
        self.data_dir.join("actiongate.db")
    }

    /// The audit key's file in the data dir.
    pub fn audit_key_path(&self) -> PathBuf {
        self.data_dir.join("audit.key")
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
            commit_delay: commit_delay.map(|t| t.parse().unwrap()),
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

    /// The Postgres settings, typed, reach the store as the config file
    /// gives them, and a node holds what it sends longer than sending can
    /// take (notification timeout, a batch of chat calls).
    #[test]
    fn postgres_settings_reach_the_store_and_send_leases_outlast_a_send() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("actiongate.toml");
        std::fs::write(
            &file,
            "[storage]\ndatabase_url = \"postgres://u@127.0.0.1:1/db\"\npool_size = 7\n\
             connect_timeout = \"2s\"\nstatement_timeout = \"1500ms\"\npoll_interval = \"250ms\"\n\
             [webhooks]\ntimeout = \"20s\"\n[connectors]\ntimeout_seconds = 5\n",
        )
        .unwrap();
        let settings = Settings::load(Some(&file), &FlagOverrides::default()).unwrap();
        let Target::Postgres(pg) = settings.storage_target() else {
            panic!("a database_url means Postgres");
        };
        assert_eq!(pg.url, "postgres://u@127.0.0.1:1/db");
        assert_eq!(pg.max_connections, 7);
        assert_eq!(pg.connect_timeout, Duration::from_secs(2));
        assert_eq!(pg.statement_timeout, Duration::from_millis(1500));
        assert_eq!(pg.poll_interval, Duration::from_millis(250));
        assert_eq!(pg.delivery_lease, Duration::from_secs(50));
        assert_eq!(pg.chat_lease, Duration::from_secs(16 * 5 + 30));
        // A poll interval past a second is refused at start.
        std::fs::write(
            &file,
            "[storage]\ndatabase_url = \"postgres://u@h/db\"\npoll_interval = \"2s\"\n",
        )
        .unwrap();
        let err = Settings::load(Some(&file), &FlagOverrides::default()).unwrap_err();
        assert!(err.to_string().contains("poll_interval"), "{err}");
    }

    #[test]
    fn mcp_allowed_origins_take_origins_only() {
        for ok in [
            "https://app.example.com",
            "http://localhost:*",
            "http://127.0.0.1:3000",
            "http://[::1]:8080",
            "null",
        ] {
            assert!(is_origin(ok), "{ok}");
        }
        for no in [
            "",
            "*",
            "app.example.com",
            "ftp://x",
            "https://",
            "https://a.example/path",
            "https://u@a.example",
            "https://a.example?q",
        ] {
            assert!(!is_origin(no), "{no}");
        }
        let mut s = Settings::default();
        s.http.mcp_allowed_origins = vec!["example.com".to_owned()];
        let err = s.validate().unwrap_err();
        assert!(
            err.to_string().contains("http.mcp_allowed_origins"),
            "{err}"
        );
    }
}

#[cfg(test)]
mod env_tests {
    #![allow(clippy::unwrap_used)]

    use super::NOT_SETTINGS;

    /// Every `ACTIONGATE_X` a command reads (no `__`: not a section's
    /// setting) is left out of the settings, or a shell that exported it
    /// for a client could not start the daemon.
    #[test]
    fn every_client_variable_is_left_out_of_the_settings() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let re = regex::Regex::new(r#""ACTIONGATE_([A-Z][A-Z0-9_]*)""#).unwrap();
        let mut seen = Vec::new();
        for dir in ["cli/src", "server/src", "executor/src"] {
            let mut stack = vec![std::path::Path::new(root).join(dir)];
            while let Some(d) = stack.pop() {
                for e in std::fs::read_dir(&d).unwrap() {
                    let p = e.unwrap().path();
                    if p.is_dir() {
                        stack.push(p);
                    } else if p.extension().is_some_and(|x| x == "rs") {
                        let text = std::fs::read_to_string(&p).unwrap();
                        for c in re.captures_iter(&text) {
                            let name = c[1].to_lowercase();
                            if !name.contains("__") {
                                seen.push((name, p.display().to_string()));
                            }
                        }
                    }
                }
            }
        }
        assert!(seen.iter().any(|(n, _)| n == "hook_wait"), "{seen:?}");
        let top = ["listen", "data_dir", "log_format", "log_level"];
        for (name, file) in seen {
            assert!(
                NOT_SETTINGS.contains(&name.as_str()) || top.contains(&name.as_str()),
                "ACTIONGATE_{} (read in {file}) is not in NOT_SETTINGS",
                name.to_uppercase()
            );
        }
    }
}
