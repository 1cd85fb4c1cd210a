//! `actiongate profile replay AGENT FILE`: what a candidate profile would
//! have decided otherwise over the agent's recorded actions (admin key);
//! reads only. Also the profile file reader `check --profile` uses.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::http::{Api, ClientError, path_segment, report};
use super::output::{clip, s};
use super::{Common, Exit};

/// `profile` subcommands.
#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// Replay a candidate profile over an agent's recorded actions and
    /// print the decisions that would change (admin key).
    Replay(ReplayArgs),
}

/// Flags of `profile replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// The agent whose history is replayed.
    pub agent: String,
    /// The candidate profile: a JSON file (`{"allow": [...], ...}` or a
    /// preset name as a JSON string).
    pub file: PathBuf,
    /// How far back: `30d` (default), `12h`, or an RFC 3339 time.
    #[arg(long)]
    pub since: Option<String>,
}

/// Reads a profile file: JSON (an object, or a preset name as a string).
pub fn read_profile(path: &Path) -> Result<Value, ClientError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ClientError::Usage(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| ClientError::Usage(format!("{} is not JSON: {e}", path.display())))
}

/// Runs a `profile` subcommand.
pub async fn run(cmd: ProfileCommand) -> Exit {
    let ProfileCommand::Replay(a) = cmd;
    match replay(&a).await {
        Ok(exit) => exit,
        Err(e) => report(&e),
    }
}

async fn replay(a: &ReplayArgs) -> Result<Exit, ClientError> {
    let profile = read_profile(&a.file)?;
    let api = Api::new(&a.common.conn)?;
    api.require_key()?;
    let mut body = json!({"profile": profile});
    if let Some(since) = &a.since {
        body["since"] = json!(since);
    }
    let answer = api
        .post(
            &format!("/v1/agents/{}/profile/replay", path_segment(&a.agent)),
            &body,
        )
        .await?;
    if a.common.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&answer).unwrap_or_else(|_| answer.to_string())
        );
        return Ok(Exit::Ok);
    }
    println!(
        "{} (of {} actions since {})",
        s(&answer, "summary"),
        answer["replayed"],
        s(&answer, "since")
    );
    for g in answer["groups"].as_array().into_iter().flatten() {
        println!("{} -> {}: {}", s(g, "from"), s(g, "to"), g["count"]);
        for ex in g["examples"].as_array().into_iter().flatten() {
            println!("  {}  {}", s(ex, "id"), clip(s(ex, "action_string"), 200));
        }
    }
    Ok(Exit::Ok)
}
