//! `actiongate mcp proxy --name NAME -- CMD ARGS...`: a stdio MCP server
//! that starts CMD (any stdio MCP server), or reaches a Streamable HTTP one
//! with `--upstream-url`, relays its tools and gates each call through the
//! daemon (see [`proxy`]); tool definitions are pinned (see [`pins`]).

pub mod coalesce;
pub mod pin_questions;
pub mod pins;
pub mod progress;
pub mod proxy;
pub mod requests;
pub mod screen;
pub mod upstream;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use clap::{Args, Subcommand};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::Exit;
use super::http::{Api, Conn};

/// `mcp` subcommands.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Put the gate in front of an MCP server: a stdio MCP server that
    /// relays CMD's tools and gates every call (agent key).
    Proxy(ProxyArgs),
}

/// Flags of `mcp proxy`.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// Where the daemon is; the key must be an agent key.
    #[command(flatten)]
    pub conn: Conn,
    /// The server's name: calls are the actions `tool:mcp__NAME__<tool>:<arguments>`.
    #[arg(long, value_parser = parse_name)]
    pub name: String,
    /// The pin state file (default `$HOME/.config/actiongate/mcp-pins/NAME.json`).
    #[arg(long, env = "ACTIONGATE_MCP_PINS", value_name = "FILE")]
    pub pins: Option<PathBuf>,
    /// Front a remote Streamable HTTP MCP server instead of starting CMD.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub upstream_url: Option<String>,
    /// A header sent with every request to the `--upstream-url` server,
    /// e.g. `Authorization: Bearer ...` (repeatable).
    #[arg(long, value_name = "NAME: VALUE", requires = "upstream_url", value_parser = parse_header)]
    pub upstream_header: Vec<(HeaderName, HeaderValue)>,
    /// Seconds between progress notifications while a call waits for a human.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=30))]
    pub progress_seconds: u64,
    /// Largest message the upstream server may send, in bytes: a larger
    /// answer to a call is an error result.
    #[arg(long, env = "ACTIONGATE_MCP_MAX_MESSAGE_BYTES", default_value_t = 16 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1024..=1024 * 1024 * 1024))]
    pub max_message_bytes: u64,
    /// Deepest nesting of arrays and objects in an upstream message: a
    /// deeper answer to a call is an error result.
    #[arg(long, env = "ACTIONGATE_MCP_MAX_MESSAGE_DEPTH", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(8..=120))]
    pub max_message_depth: u64,
    /// Longest a forwarded call may wait for the upstream server's answer,
    /// in seconds, before it is cancelled and answered with an error result.
    #[arg(long, env = "ACTIONGATE_MCP_UPSTREAM_TIMEOUT", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub upstream_timeout: u64,
    /// The session the proxy's actions belong to (what the upstream server
    /// answers taints it, so a way out after it asks: docs/sessions.md);
    /// default: a session of this run's own.
    #[arg(long, env = "ACTIONGATE_MCP_SESSION", value_parser = parse_session)]
    pub session: Option<String>,
    /// The upstream stdio MCP server and its arguments (after `--`).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// A server's name: `mcp__NAME__<tool>` must say which server and which
/// tool, so NAME holds no `__` and does not end in `_` (else server `a`'s
/// tool `b__c` and server `a__b`'s tool `c` would be one action tool).
fn parse_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !s.contains("__")
        && !s.ends_with('_');
    if ok {
        Ok(s.to_owned())
    } else {
        Err("1-64 of A-Z a-z 0-9 _ -, without __ and not ending in _".to_owned())
    }
}

fn parse_session(s: &str) -> Result<String, String> {
    if crate::hooks::gate::valid_session(s) {
        Ok(s.to_owned())
    } else {
        Err(
            "1-200 characters, no control, invisible or bidi characters, no surrounding white space"
                .to_owned(),
        )
    }
}

/// A session of this run's own: each start of the proxy serves one
/// client, whose calls it gates in one session.
fn own_session(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("mcp-proxy-{name}-{nanos:x}-{}", std::process::id())
}

fn parse_header(s: &str) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) = s.split_once(':').ok_or("expected NAME: VALUE".to_owned())?;
    let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|e| e.to_string())?;
    let value = HeaderValue::from_str(value.trim()).map_err(|e| e.to_string())?;
    Ok((name, value))
}

fn pins_path(args: &ProxyArgs) -> PathBuf {
    if let Some(p) = &args.pins {
        return p.clone();
    }
    let base = std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".config/actiongate/mcp-pins"))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join(format!("{}.json", args.name))
}

/// Runs the proxy until the agent's side closes.
pub async fn proxy(args: ProxyArgs) -> Exit {
    match run(args).await {
        Ok(()) => Exit::Ok,
        Err((exit, message)) => {
            eprintln!("actiongate mcp proxy: {message}");
            exit
        }
    }
}

async fn run(args: ProxyArgs) -> Result<(), (Exit, String)> {
    let usage = |m: String| (Exit::Usage, m);
    // Each call waits in steps of at most `progress_seconds`.
    let api = Api::with_timeouts(&args.conn, Duration::from_secs(5), Duration::from_secs(30))
        .map_err(|e| usage(e.to_string()))?;
    api.require_key().map_err(|e| usage(e.to_string()))?;
    let pins = pins::PinFile::load(&pins_path(&args)).map_err(usage)?;
    let downstream: upstream::Downstream = Arc::new(StdMutex::new(None));
    let progress: progress::ProgressTokens = Arc::default();
    let handler = upstream::Upstream {
        downstream: downstream.clone(),
        changes: Arc::default(),
    };
    let limits = screen::Limits {
        max_bytes: usize::try_from(args.max_message_bytes).unwrap_or(usize::MAX),
        max_depth: usize::try_from(args.max_message_depth).unwrap_or(64),
    };
    let wait = Duration::from_secs(args.upstream_timeout);
    let upstream = match (&args.upstream_url, args.command.split_first()) {
        (Some(url), _) => {
            let headers: HashMap<_, _> = args.upstream_header.iter().cloned().collect();
            let mut config =
                StreamableHttpClientTransportConfig::with_uri(url.clone()).custom_headers(headers);
            config.max_sse_event_size = limits.max_bytes;
            within(
                wait,
                handler.serve(progress::Counting::new(
                    requests::Bounded::new(StreamableHttpClientTransport::from_config(config)),
                    progress.clone(),
                )),
            )
            .await
            .map_err(|e| (Exit::Unreachable, format!("cannot reach {url}: {e}")))?
        }
        (None, Some((cmd, rest))) => {
            let mut command = tokio::process::Command::new(cmd);
            command.args(rest);
            // The upstream is a stranger: none of the gate's settings, its
            // agent key above all, is passed down to it.
            for (key, _) in std::env::vars_os() {
                if key.to_string_lossy().starts_with("ACTIONGATE_") {
                    command.env_remove(key);
                }
            }
            let transport = screen::ScreenedChild::spawn(command, limits)
                .map_err(|e| (Exit::Unreachable, format!("cannot start {cmd}: {e}")))?;
            within(
                wait,
                handler.serve(progress::Counting::new(
                    requests::Bounded::new(transport),
                    progress.clone(),
                )),
            )
            .await
            .map_err(|e| {
                (
                    Exit::Unreachable,
                    format!("{cmd} did not start as an MCP server: {e}"),
                )
            })?
        }
        (None, None) => {
            return Err(usage(
                "name the upstream server: -- CMD ARGS... or --upstream-url URL".to_owned(),
            ));
        }
    };
    let mut server = proxy::Proxy {
        name: args.name.clone(),
        api: Arc::new(api),
        upstream: upstream.peer().clone(),
        pins: Arc::new(tokio::sync::Mutex::new(pins)),
        downstream,
        progress_every: Duration::from_secs(args.progress_seconds),
        progress,
        upstream_timeout: Duration::from_secs(args.upstream_timeout),
        session: args
            .session
            .clone()
            .unwrap_or_else(|| own_session(&args.name)),
        instructions: None,
    };
    let instructions = upstream
        .peer()
        .peer_info()
        .and_then(|i| i.instructions.clone());
    server.instructions = server
        .accepted_instructions(instructions)
        .await
        .map_err(|e| (Exit::Api, e))?;
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| (Exit::Api, format!("the MCP client did not connect: {e}")))?;
    let _ = running.waiting().await;
    let _ = upstream.cancel().await;
    Ok(())
}

/// The upstream's answer to `initialize`, bounded like every other answer
/// the proxy waits for (`--upstream-timeout`): one that never comes fails
/// the start rather than hold the agent's client for ever.
async fn within<T, E: std::fmt::Display>(
    wait: Duration,
    serving: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(wait, serving).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!(
            "no answer to initialize within {} s (--upstream-timeout)",
            wait.as_secs()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_keep_mcp_tool_names_unambiguous() {
        for ok in ["fs", "my-server", "a_b", "_x", "A1"] {
            assert!(parse_name(ok).is_ok(), "{ok}");
        }
        for no in ["", "a__b", "a_", "a b", "a:b", &"x".repeat(65)] {
            assert!(parse_name(no).is_err(), "{no}");
        }
    }
}
