//! The actions of seed 002: their params, and running one to an [`Outcome`]
//! (the HTTP answer plus the journal's status and details).
//!
//! Every outcome is final: success answers 200; anything else, refused or
//! failed, answers 422 so the daemon does not retry something that either
//! will fail the same way or may already have had an effect.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::command;
use crate::files;
use crate::journal::Status;
use crate::paths::{PathError, Root};

/// The actions this executor performs, in registration order.
pub const ACTIONS: [&str; 5] = [
    "create_file",
    "update_file",
    "update_readme",
    "read_file",
    "execute_command",
];

/// What actions need to run.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The confinement root (and the commands' working directory).
    pub root: Root,
    /// Commands are killed after this long.
    pub command_timeout: Duration,
    /// Cap of each of a command's stdout and stderr, in bytes.
    pub output_cap: usize,
    /// Cap of what `read_file` returns, in bytes.
    pub read_cap: usize,
}

/// Why an action did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// The action is not one of [`ACTIONS`].
    #[error("unknown action '{0}'")]
    UnknownAction(String),
    /// The params do not fit the action.
    #[error("invalid params: {0}")]
    InvalidParams(String),
    /// A path was refused or could not be resolved.
    #[error(transparent)]
    Path(#[from] PathError),
    /// `create_file` on an existing file.
    #[error("'{0}' already exists; use update_file to replace it")]
    Exists(String),
    /// `update_file` on a missing file.
    #[error("'{0}' does not exist; use create_file to create it")]
    Missing(String),
    /// The file system failed.
    #[error("'{0}': {1}")]
    Io(String, std::io::Error),
    /// The shell could not be started.
    #[error("cannot start the shell: {0}")]
    Spawn(std::io::Error),
}

impl ActionError {
    /// A stable machine-readable kind.
    pub fn kind(&self) -> &'static str {
        match self {
            ActionError::UnknownAction(_) => "unknown_action",
            ActionError::InvalidParams(_) => "invalid_params",
            ActionError::Path(p) if p.is_refusal() => "path_refused",
            ActionError::Path(PathError::Io(..)) => "io_error",
            ActionError::Path(_) => "bad_path",
            ActionError::Exists(_) => "exists",
            ActionError::Missing(_) => "not_found",
            ActionError::Io(..) => "io_error",
            ActionError::Spawn(_) => "spawn_failed",
        }
    }

    fn status(&self) -> Status {
        match self.kind() {
            "io_error" | "spawn_failed" => Status::Error,
            _ => Status::Failed,
        }
    }
}

/// How a delivery ended: the HTTP answer and what the journal says.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// HTTP status: 200 or 422.
    pub code: u16,
    /// JSON body: the result, or `{"error", "kind", …details}`.
    pub body: Value,
    /// The journal's status.
    pub status: Status,
    /// The journal's one-line details.
    pub details: String,
}

impl Outcome {
    fn success(body: Value, details: String) -> Outcome {
        Outcome {
            code: 200,
            body,
            status: Status::Success,
            details,
        }
    }

    /// A 422 with `{"error": message, "kind": kind, …extra}`.
    pub fn failure(status: Status, kind: &str, message: String, extra: Value) -> Outcome {
        let mut body = Map::new();
        body.insert("error".into(), Value::String(message.clone()));
        body.insert("kind".into(), Value::String(kind.to_owned()));
        if let Value::Object(extra) = extra {
            body.extend(extra);
        }
        Outcome {
            code: 422,
            body: Value::Object(body),
            status,
            details: message,
        }
    }

    fn from_error(e: ActionError) -> Outcome {
        Outcome::failure(e.status(), e.kind(), e.to_string(), Value::Null)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteParams {
    filepath: String,
    content: String,
    #[serde(rename = "reason")]
    _reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadmeParams {
    reason: String,
    #[serde(default)]
    filepath: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadParams {
    filepath: String,
    #[serde(rename = "reason")]
    _reason: String,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Shell {
    Bash,
    Sh,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandParams {
    content: String,
    #[serde(default)]
    filepath: Option<Shell>,
    #[serde(rename = "reason")]
    _reason: String,
}

fn parse<T: serde::de::DeserializeOwned>(params: &Value) -> Result<T, ActionError> {
    T::deserialize(params).map_err(|e| ActionError::InvalidParams(e.to_string()))
}

/// Runs `action` with `params`; never panics, always an outcome.
pub async fn run(ctx: Arc<Ctx>, action: &str, params: Value) -> Outcome {
    match action {
        "execute_command" => run_command(&ctx, &params).await,
        "create_file" | "update_file" | "update_readme" | "read_file" => {
            let action = action.to_owned();
            let joined =
                tokio::task::spawn_blocking(move || run_file(&ctx, &action, &params)).await;
            match joined {
                Ok(Ok(o)) => o,
                Ok(Err(e)) => Outcome::from_error(e),
                Err(e) => Outcome::failure(
                    Status::Error,
                    "internal",
                    format!("the action stopped unexpectedly: {e}"),
                    Value::Null,
                ),
            }
        }
        other => Outcome::from_error(ActionError::UnknownAction(other.to_owned())),
    }
}

/// A JSON value as plain text (strings without their quotes).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn run_file(ctx: &Ctx, action: &str, params: &Value) -> Result<Outcome, ActionError> {
    Ok(match action {
        "create_file" => {
            let p: WriteParams = parse(params)?;
            let body = files::create(&ctx.root, &p.filepath, &p.content)?;
            let details = format!(
                "created {} ({} bytes)",
                text(&body["path"]),
                p.content.len()
            );
            Outcome::success(body, details)
        }
        "update_file" => {
            let p: WriteParams = parse(params)?;
            let body = files::update(&ctx.root, &p.filepath, &p.content)?;
            let details = format!(
                "updated {} ({} bytes), previous version in {}",
                text(&body["path"]),
                p.content.len(),
                text(&body["backup"])
            );
            Outcome::success(body, details)
        }
        "update_readme" => {
            let p: ReadmeParams = parse(params)?;
            let body = files::readme(
                &ctx.root,
                p.filepath.as_deref(),
                &p.reason,
                chrono::Utc::now(),
            )?;
            let details = format!("appended to the auto-update log of {}", text(&body["path"]));
            Outcome::success(body, details)
        }
        "read_file" => {
            let p: ReadParams = parse(params)?;
            let body = files::read(&ctx.root, &p.filepath, ctx.read_cap)?;
            let details = format!(
                "read {} ({} bytes)",
                text(&body["path"]),
                text(&body["bytes"])
            );
            Outcome::success(body, details)
        }
        other => return Err(ActionError::UnknownAction(other.to_owned())),
    })
}

/// The program that runs an `execute_command` line: always bash, because
/// bash is how the policy read the line (`tool:<handler>:execute_command
/// …` is analysed as a bash line). `sh` on Debian is dash, which reads
/// `&>`, `$'…'` or `[[` otherwise: a line judged harmless as bash could
/// run a second program there. `filepath: "sh"` is still accepted, and
/// runs bash in POSIX mode, which parses like bash.
fn shell_for(requested: Option<Shell>) -> &'static [&'static str] {
    match requested {
        Some(Shell::Sh) => &["bash", "--posix"],
        Some(Shell::Bash) | None => &["bash"],
    }
}

async fn run_command(ctx: &Ctx, params: &Value) -> Outcome {
    let p: CommandParams = match parse(params) {
        Ok(p) => p,
        Err(e) => return Outcome::from_error(e),
    };
    let shell = shell_for(p.filepath);
    let out = match command::run(
        ctx.root.path(),
        shell,
        &p.content,
        ctx.command_timeout,
        ctx.output_cap,
    )
    .await
    {
        Ok(out) => out,
        Err(e) => return Outcome::from_error(ActionError::Spawn(e)),
    };
    let body = serde_json::to_value(&out).unwrap_or(Value::Null);
    if out.succeeded() {
        let details = format!("exit 0 in {} ms", out.duration_ms);
        Outcome::success(body, details)
    } else if out.timed_out {
        let msg = format!(
            "timed out after {}; the command was killed",
            humantime::format_duration(ctx.command_timeout)
        );
        Outcome::failure(Status::Failed, "timed_out", msg, body)
    } else {
        let msg = match (out.exit_code, out.signal) {
            (Some(c), _) => format!("the command exited with status {c}"),
            (None, Some(s)) => format!("the command was killed by signal {s}"),
            (None, None) => "the command ended abnormally".to_owned(),
        };
        Outcome::failure(Status::Failed, "command_failed", msg, body)
    }
}

/// The journal's `filepath` and `reason` as sent (even when invalid).
pub fn journal_fields(params: &Value) -> (Option<String>, Option<String>) {
    let s = |k: &str| params.get(k).and_then(Value::as_str).map(str::to_owned);
    (s("filepath"), s("reason"))
}

/// The outcome of a delivery that an earlier process started and never
/// finished: it is not re-run, since it may already have happened.
pub fn interrupted() -> Outcome {
    Outcome::failure(
        Status::Error,
        "interrupted",
        "interrupted; not re-run to avoid doing it twice (the executor stopped while it was running, so it may or may not have taken effect)".to_owned(),
        json!({}),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// `echo hi &>/dev/null touch marker` is one harmless `echo` to bash
    /// (which the policy reads) but `echo hi &` then `touch marker` to
    /// dash. Whatever shell is asked for, the line runs as bash read it.
    #[tokio::test]
    async fn the_line_runs_in_the_shell_the_policy_analysed() {
        let line = "echo hi &>/dev/null touch marker";
        for requested in [None, Some(Shell::Sh), Some(Shell::Bash)] {
            let dir = tempfile::tempdir().unwrap();
            let out = command::run(
                dir.path(),
                shell_for(requested),
                line,
                std::time::Duration::from_secs(10),
                1024,
            )
            .await
            .unwrap();
            assert!(out.succeeded());
            assert!(!dir.path().join("marker").exists());
        }
    }
}
