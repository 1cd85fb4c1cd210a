//! The `[limits]` and `[outbound]` settings: what one agent may hold and
//! send, and where the daemon's outbound requests may go.

use serde::{Deserialize, Serialize};

use actiongate_gate::bounds::JsonLimits;
use actiongate_gate::outbound::OutboundPolicy;

/// Limits on what agents may hold at once and send.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsSettings {
    /// Most items (actions and grant requests) one agent may have waiting
    /// for a human at once; past it, new ones get 429 `limit-reached`.
    pub max_pending_per_agent: usize,
    /// Most runs without a decision (`POST /v1/runs` that no action
    /// covers) one agent may report to this daemon a minute; past it, 429.
    pub max_undecided_runs_per_minute: usize,
    /// Most bytes of requests (actions, plans, outcomes and reported runs,
    /// as JSON) one agent may have this daemon store an hour; past it, 429.
    pub max_request_bytes_per_agent_per_hour: u64,
    /// Most event streams and long-polls (`?wait=`) one key holds open at
    /// once on this daemon; past it, new ones get 429 `limit-reached`.
    /// Each costs a connection and some memory while its client keeps it.
    pub max_open_per_key: usize,
    /// Most of one key's other requests being answered at once on this
    /// daemon; past it, new ones get 429 `limit-reached`.
    pub max_in_flight_per_key: usize,
    /// Largest params of a handler action, in bytes of compact JSON.
    pub params_max_bytes: usize,
    /// Largest scope of a grant, grant request or remembered approval.
    pub scope_max_bytes: usize,
}

impl Default for LimitsSettings {
    fn default() -> Self {
        let json = JsonLimits::default();
        LimitsSettings {
            max_pending_per_agent: 100,
            max_undecided_runs_per_minute: 60,
            max_request_bytes_per_agent_per_hour: 256 << 20,
            max_open_per_key: 200,
            max_in_flight_per_key: 256,
            params_max_bytes: json.params,
            scope_max_bytes: json.scope,
        }
    }
}

impl LimitsSettings {
    /// Checks what types alone cannot.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.max_pending_per_agent == 0 {
            anyhow::bail!("limits.max_pending_per_agent: must be at least 1");
        }
        if self.max_undecided_runs_per_minute == 0 {
            anyhow::bail!("limits.max_undecided_runs_per_minute: must be at least 1");
        }
        if self.max_request_bytes_per_agent_per_hour == 0 {
            anyhow::bail!("limits.max_request_bytes_per_agent_per_hour: must be at least 1");
        }
        if self.max_open_per_key == 0 {
            anyhow::bail!("limits.max_open_per_key: must be at least 1");
        }
        if self.max_in_flight_per_key == 0 {
            anyhow::bail!("limits.max_in_flight_per_key: must be at least 1");
        }
        if self.params_max_bytes == 0 || self.scope_max_bytes == 0 {
            anyhow::bail!("limits: byte limits must be at least 1");
        }
        Ok(())
    }

    /// The JSON size limits, results bounded by `result_max_bytes`.
    pub fn json(&self, result_max_bytes: usize) -> JsonLimits {
        JsonLimits {
            params: self.params_max_bytes,
            result: result_max_bytes,
            scope: self.scope_max_bytes,
        }
    }
}

/// Where handler (executor) and subscription URLs may point.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutboundSettings {
    /// Host names URLs may name (`exec.internal`, `*.example.com`); empty:
    /// any. When set, URLs must name one of them, not an address.
    pub allowed_hosts: Vec<String>,
    /// Networks every address the daemon connects to must lie in:
    /// `loopback`, `private`, `public`, or CIDR networks.
    pub allowed_networks: Vec<String>,
}

impl Default for OutboundSettings {
    fn default() -> Self {
        OutboundSettings {
            allowed_hosts: Vec::new(),
            allowed_networks: vec!["loopback".into(), "private".into(), "public".into()],
        }
    }
}

impl OutboundSettings {
    /// The policy, or an error naming the entry at fault.
    pub fn policy(&self) -> anyhow::Result<OutboundPolicy> {
        OutboundPolicy::new(&self.allowed_hosts, &self.allowed_networks)
            .map_err(|e| anyhow::anyhow!("outbound.{e}"))
    }
}
