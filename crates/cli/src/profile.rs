//! `actiongate profile replay AGENT FILE`: what a candidate profile would
//! have decided otherwise over the agent's recorded actions (admin key);
//! reads only. `profile set AGENT FILE` then makes it the agent's, saying
//! what cannot work as things stand; `profile show AGENT` prints it. Also
//! the profile file reader `check --profile` uses.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::commands::{api, print_json};
use super::http::{ClientError, path_segment, report};
use super::output::{clip, s};
use super::{Common, Exit};

/// `profile` subcommands.
#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// Replay a candidate profile over an agent's recorded actions and
    /// print the decisions that would change (admin key).
    Replay(ReplayArgs),
    /// Make a profile the agent's (admin key); prints the daemon's
    /// warnings, such as a quorum no registered people could meet.
    Set(SetArgs),
    /// Print an agent's profile (admin key).
    Show(ShowArgs),
}

/// Flags of `profile set`.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// The agent (created when new).
    pub agent: String,
    /// The profile: a JSON file (`{"allow": [...], ...}` or a preset name
    /// as a JSON string).
    pub file: PathBuf,
}

/// Flags of `profile show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// The agent.
    pub agent: String,
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
    let done = match cmd {
        ProfileCommand::Replay(a) => replay(&a).await,
        ProfileCommand::Set(a) => set(&a).await,
        ProfileCommand::Show(a) => show(&a).await,
    };
    done.unwrap_or_else(|e| report(&e))
}

async fn set(a: &SetArgs) -> Result<Exit, ClientError> {
    let profile = read_profile(&a.file)?;
    let api = api(&a.common)?;
    let path = format!("/v1/agents/{}", path_segment(&a.agent));
    // A PUT replaces the agent whole: keep the name it has.
    let name = match api.get(&path).await {
        Ok(agent) => agent.get("name").cloned().unwrap_or(Value::Null),
        Err(ClientError::Api(p)) if p.status == 404 => Value::Null,
        Err(e) => return Err(e),
    };
    let agent = api
        .put(&path, &json!({"name": name, "profile": profile}))
        .await?;
    if a.common.json {
        print_json(&agent);
        return Ok(Exit::Ok);
    }
    for w in agent["warnings"].as_array().into_iter().flatten() {
        eprintln!("warning: {}", w.as_str().unwrap_or_default());
    }
    println!("profile of {} set", s(&agent, "id"));
    Ok(Exit::Ok)
}

async fn show(a: &ShowArgs) -> Result<Exit, ClientError> {
    let api = api(&a.common)?;
    let agent = api
        .get(&format!("/v1/agents/{}", path_segment(&a.agent)))
        .await?;
    if a.common.json {
        print_json(&agent);
    } else if agent["profile"].is_null() {
        println!(
            "{} has no profile of its own: the daemon's default_profile applies",
            s(&agent, "id")
        );
    } else {
        print_json(&agent["profile"]);
    }
    Ok(Exit::Ok)
}

async fn replay(a: &ReplayArgs) -> Result<Exit, ClientError> {
    let profile = read_profile(&a.file)?;
    let api = api(&a.common)?;
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
        print_json(&answer);
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
