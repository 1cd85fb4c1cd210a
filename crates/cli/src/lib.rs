//! The `actiongate` commands that talk to a running daemon over its HTTP API:
//! the operator's queue commands (`pending`, `show`, `approve`, `deny`,
//! `reply`, `grant`, `grants`, `revoke`, `tail`), the agent's `request` and
//! `check`, the agent runtimes' hooks ([`hooks`]) with `setup`, `doctor`
//! and `wrap`, the JSONL outbox follower and the MCP proxy ([`mcp`]).
//!
//! Layout: [`http`] wraps reqwest and turns problem+json answers into
//! [`http::ClientError`]; [`output`] renders tables and one-line summaries;
//! [`commands`] holds the request/response commands (their flags are in
//! [`args`]); [`tail`] follows the
//! SSE stream; [`hooks`] answers the agent runtimes' hooks (one module
//! per runtime, one mapping, one fail-closed client); [`setup`] installs
//! them and [`doctor`] checks them; [`wrap`] gates an agent's `$SHELL`; [`outbox`]
//! follows a JSONL outbox exactly once. Every command ends with an [`Exit`]
//! code that scripts can branch on (documented in the README).

pub mod args;
pub mod commands;
pub mod doctor;
pub mod grant_requests;
pub mod hooks;
pub mod http;
pub mod mcp;
pub mod outbox;
pub mod output;
pub mod people;
pub mod plans;
pub mod profile;
pub mod receipt;
pub mod sessions;
pub mod setup;
pub mod tail;
pub mod visible;
pub mod wrap;

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::Value;

use http::Conn;

/// Exit codes of the client commands (clap's usage errors exit 2 too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Done: approved, completed, allowed, or the operator command succeeded.
    Ok = 0,
    /// Denied (by policy or a human), or the action failed.
    Denied = 1,
    /// Usage error or bad input (clap's default code for usage errors).
    Usage = 2,
    /// Expired (nobody decided before the deadline) or cancelled.
    Expired = 3,
    /// Still pending when the wait ran out; for `check`, the answer is ask.
    Pending = 4,
    /// The daemon answered with an error (problem+json), or an unreadable answer.
    Api = 5,
    /// The daemon could not be reached (or did not answer in time).
    Unreachable = 6,
    /// Approved as an approver edited it: what was approved is not what
    /// was asked, so it must not run as asked.
    Edited = 7,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

/// Flags shared by the commands that print results.
#[derive(Debug, Clone, Args)]
pub struct Common {
    /// Where the daemon is and which key to use.
    #[command(flatten)]
    pub conn: Conn,
    /// Print JSON (the API's objects) instead of human-readable text.
    #[arg(long)]
    pub json: bool,
}

/// Parses `--scope k=v`: the value is JSON if it parses (numbers, bools,
/// quoted strings), else the text itself.
pub fn parse_scope(s: &str) -> Result<(String, Value), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=VALUE, got '{s}'"))?;
    let k = k.trim();
    if k.is_empty() {
        return Err(format!("empty scope key in '{s}'"));
    }
    let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_owned()));
    Ok((k.to_owned(), value))
}

/// The client commands, flattened into the top-level `actiongate` command.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// List actions waiting for a human (operator key).
    Pending(args::PendingArgs),
    /// Show one action.
    Show(args::ShowArgs),
    /// Approve a pending action, optionally remembering it as a grant (operator key).
    Approve(args::ApproveArgs),
    /// Deny a pending action (operator key).
    Deny(args::DenyArgs),
    /// List the plans agents asked approval for (operator key).
    Plans(plans::PlansArgs),
    /// Approve or deny a plan (operator key).
    #[command(subcommand)]
    Plan(plans::PlanCommand),
    /// Decide a pending action by free text: yes/approve/ok/continue or no/reject/stop/cancel.
    Reply(args::ReplyArgs),
    /// Grant a scoped, expiring permission (operator key).
    Grant(args::GrantArgs),
    /// List grants (operator key).
    Grants(args::GrantsArgs),
    /// List the permissions agents asked a human for (operator key).
    GrantRequests(grant_requests::GrantRequestsArgs),
    /// Approve or deny a grant request (operator key).
    #[command(subcommand)]
    GrantRequest(grant_requests::GrantRequestCommand),
    /// Revoke a grant (operator key).
    Revoke(args::RevokeArgs),
    /// List the people keys and chat identities belong to (admin key).
    People(people::PeopleArgs),
    /// Add, replace or remove a person (admin key); only people count
    /// toward a quorum.
    #[command(subcommand)]
    Person(people::PersonCommand),
    /// Sessions (tasks) and their actions; `--end` ends one.
    Sessions(sessions::SessionsArgs),
    /// Follow the event stream, one line per event; reconnects and resumes.
    Tail(tail::TailArgs),
    /// Request a decision-only action and optionally wait for the decision (agent key).
    Request(args::RequestArgs),
    /// Ask what the policy would decide, storing nothing (agent key; with
    /// `--profile FILE`, an admin key: a dry run of that profile).
    Check(args::CheckArgs),
    /// Hooks for agent runtimes (Claude Code, Cursor, Gemini CLI, Codex, Copilot CLI, opencode).
    #[command(subcommand)]
    Hook(hooks::HookCommand),
    /// Gate an agent runtime: daemon, agent key and the runtime's hook config.
    Setup(setup::SetupArgs),
    /// Check the daemon, the keys and each runtime's hook config.
    Doctor(doctor::DoctorArgs),
    /// Run an agent with a $SHELL shim that gates every shell command it runs.
    Wrap(wrap::WrapArgs),
    /// Submit a JSONL outbox's actions to the daemon.
    #[command(subcommand)]
    Outbox(outbox::OutboxCommand),
    /// Model Context Protocol: gate the tools of any MCP server.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Profiles: replay a candidate over an agent's history (admin key).
    #[command(subcommand)]
    Profile(profile::ProfileCommand),
    /// Signed decision receipts: print the daemon's key, verify one offline.
    #[command(subcommand)]
    Receipt(receipt::ReceiptCommand),
}

/// Runs a client command; the process exit code.
pub async fn run(cmd: ClientCommand) -> ExitCode {
    crate::install_tls_provider();
    let exit = match cmd {
        ClientCommand::Pending(a) => commands::pending(a).await,
        ClientCommand::Show(a) => commands::show(a).await,
        ClientCommand::Approve(a) => commands::approve(a).await,
        ClientCommand::Deny(a) => commands::deny(a).await,
        ClientCommand::Plans(a) => plans::plans(a).await,
        ClientCommand::Plan(c) => plans::run(c).await,
        ClientCommand::Reply(a) => commands::reply(a).await,
        ClientCommand::Grant(a) => commands::grant(a).await,
        ClientCommand::Grants(a) => commands::grants(a).await,
        ClientCommand::GrantRequests(a) => grant_requests::grant_requests(a).await,
        ClientCommand::GrantRequest(c) => grant_requests::run(c).await,
        ClientCommand::Revoke(a) => commands::revoke(a).await,
        ClientCommand::People(a) => people::people(a).await,
        ClientCommand::Person(c) => people::run(c).await,
        ClientCommand::Sessions(a) => sessions::run(a).await,
        ClientCommand::Tail(a) => tail::tail(a).await,
        ClientCommand::Request(a) => commands::request(a).await,
        ClientCommand::Check(a) => commands::check(a).await,
        ClientCommand::Hook(cmd) => hooks::run(cmd).await,
        ClientCommand::Setup(a) => setup::run(a).await,
        ClientCommand::Doctor(a) => doctor::run(a).await,
        ClientCommand::Wrap(a) => return wrap::run(a).await,
        ClientCommand::Outbox(outbox::OutboxCommand::Follow(a)) => outbox::follow(a).await,
        ClientCommand::Mcp(mcp::McpCommand::Proxy(a)) => mcp::proxy(a).await,
        ClientCommand::Receipt(c) => receipt::run(c).await,
        ClientCommand::Profile(c) => profile::run(c).await,
    };
    exit.into()
}

/// Installs rustls' `ring` provider, once per process, before any HTTPS
/// client is built: reqwest is built without a provider of its own (see
/// DEPENDENCIES.md). The daemon's outbound clients call this too, so the
/// binary sets TLS up in one place.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn scope_values_are_json_when_they_parse() {
        assert_eq!(parse_scope("n=3").unwrap(), ("n".into(), json!(3)));
        assert_eq!(parse_scope("b=true").unwrap(), ("b".into(), json!(true)));
        assert_eq!(
            parse_scope("to=*@example.com").unwrap(),
            ("to".into(), json!("*@example.com"))
        );
        assert_eq!(parse_scope("s=\"42\"").unwrap(), ("s".into(), json!("42")));
        assert_eq!(parse_scope("e=").unwrap(), ("e".into(), json!("")));
        assert_eq!(parse_scope("p=a=b").unwrap(), ("p".into(), json!("a=b")));
    }

    #[test]
    fn scope_needs_a_key_and_an_equals_sign() {
        assert!(parse_scope("novalue").is_err());
        assert!(parse_scope("=x").is_err());
    }
}
