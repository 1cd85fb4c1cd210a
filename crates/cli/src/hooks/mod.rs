//! `actiongate hook <runtime>`: one module per agent runtime, each speaking
//! that runtime's hook contract (stdin, stdout, exit code), all sharing one
//! mapping of tool calls to actions ([`map`]) and one fail-closed client
//! ([`gate`]). Whatever goes wrong, a hook answers the runtime's "deny" (or
//! its own "ask the user", if so configured), never allow, and it answers
//! within its budget so that the runtime's own timeout (which some
//! runtimes treat as "go ahead") never fires first.

pub mod claude_code;
pub mod codex;
pub mod copilot;
pub mod cursor;
pub mod dialects;
pub mod gate;
pub mod gemini;
pub mod map;
pub mod opencode;
pub mod shell;
pub mod shown;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::Exit;
use super::http::Conn;
use super::output::one_line;
use gate::{Answer, Verdict};
use map::Call;

/// `hook` subcommands.
#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Claude Code: PreToolUse, PermissionRequest and PostToolUse hooks.
    ClaudeCode(claude_code::ClaudeCodeArgs),
    /// Cursor: beforeShellExecution, beforeMCPExecution, beforeReadFile, preToolUse.
    Cursor(HookArgs),
    /// Gemini CLI: BeforeTool.
    Gemini(HookArgs),
    /// Codex CLI: PreToolUse and PermissionRequest.
    Codex(HookArgs),
    /// GitHub Copilot CLI: preToolUse.
    Copilot(HookArgs),
    /// opencode: called by the actiongate plugin's `tool.execute.before`.
    Opencode(HookArgs),
    /// The `$SHELL` shim of `actiongate wrap`: gates `-c COMMAND`, then runs the real shell.
    #[command(hide = true)]
    Shell(shell::ShellArgs),
}

/// Runs a hook subcommand.
pub async fn run(cmd: HookCommand) -> Exit {
    // A crash must not read as "go ahead": Claude Code and Gemini CLI run
    // the call when a hook exits with anything but 0 or 2, and 2 blocks it
    // in every runtime that has exit codes (the plugin and Cursor's
    // failClosed refuse any failure).
    std::panic::set_hook(Box::new(|info| {
        eprintln!(
            "actiongate hook: internal error ({}); failing closed",
            one_line(&info.to_string())
        );
        std::process::exit(2);
    }));
    match cmd {
        HookCommand::ClaudeCode(a) => claude_code::run(a).await,
        HookCommand::Cursor(a) => serve(&a, &cursor::Cursor).await,
        HookCommand::Gemini(a) => serve(&a, &gemini::Gemini).await,
        HookCommand::Codex(a) => serve(&a, &codex::Codex).await,
        HookCommand::Copilot(a) => serve(&a, &copilot::Copilot).await,
        HookCommand::Opencode(a) => serve(&a, &opencode::Opencode).await,
        HookCommand::Shell(a) => shell::run(a).await,
    }
}

/// What to answer when actiongate cannot give an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Fallback {
    /// Refuse the tool call.
    Deny,
    /// Let the runtime ask its user (runtimes without an "ask" deny).
    Ask,
}

impl Fallback {
    fn verdict(self) -> Verdict {
        match self {
            Fallback::Deny => Verdict::Deny,
            Fallback::Ask => Verdict::Ask,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Fallback::Deny => "deny",
            Fallback::Ask => "ask",
        }
    }
}

/// Flags every hook takes.
#[derive(Debug, Clone, Args)]
pub struct HookArgs {
    /// Where the daemon is; the key must be an agent key.
    #[command(flatten)]
    pub conn: Conn,
    /// Read the agent key from this file (what `actiongate setup` writes);
    /// it wins over ACTIONGATE_KEY, not over --key.
    #[arg(long, env = "ACTIONGATE_KEY_FILE", value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Seconds to wait for a human when the policy asks; keep it below the
    /// runtime's hook timeout (see docs/hooks.md).
    #[arg(
        long,
        env = "ACTIONGATE_HOOK_WAIT",
        default_value_t = 55,
        value_name = "SECONDS"
    )]
    pub wait: u64,
    /// Answer when no human decided within the wait (the pending action is withdrawn).
    #[arg(long, env = "ACTIONGATE_HOOK_ON_TIMEOUT", value_enum, default_value_t = Fallback::Deny)]
    pub on_timeout: Fallback,
    /// Answer when the daemon is unreachable or anything else fails; never allow.
    #[arg(long, env = "ACTIONGATE_HOOK_ON_ERROR", value_enum, default_value_t = Fallback::Deny)]
    pub on_error: Fallback,
}

/// The longest wait a hook takes: more than any runtime's hook timeout,
/// and small enough to add to a clock (a larger `--wait` made the hook
/// crash, and a crash's exit code lets some runtimes run the call).
const MAX_WAIT: u64 = 30 * 24 * 3600;

impl HookArgs {
    /// How long to wait for a human: `--wait`, at most [`MAX_WAIT`].
    pub fn wait_for(&self) -> Duration {
        Duration::from_secs(self.wait.min(MAX_WAIT))
    }

    /// The connection, its key read from `--key-file` unless `--key` is
    /// on the command line. The key file (which `actiongate setup` writes
    /// into the hook's command) wins over `ACTIONGATE_KEY` in the
    /// environment: a shell that exported an operator's or another
    /// agent's key for the CLI must not make the runtime act as that key.
    pub fn connection(&self) -> Result<Conn, String> {
        let mut conn = self.conn.clone();
        let key_flag = std::env::args().any(|a| a == "--key" || a.starts_with("--key="));
        let missing = conn.key.as_deref().is_none_or(|k| k.trim().is_empty());
        if (missing || !key_flag)
            && let Some(path) = &self.key_file
        {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the key file {}: {e}", path.display()))?;
            conn.key = Some(text.trim().to_owned());
        }
        Ok(conn)
    }
}

/// Largest hook input read (a Write carries a whole file).
const MAX_INPUT: u64 = 16 * 1024 * 1024;

/// Reads the hook input from stdin, with a size limit.
pub async fn read_stdin() -> Result<Value, String> {
    let mut buf = Vec::new();
    tokio::io::stdin()
        .take(MAX_INPUT + 1)
        .read_to_end(&mut buf)
        .await
        .map_err(|e| format!("cannot read the hook input: {e}"))?;
    if buf.len() as u64 > MAX_INPUT {
        return Err(format!("the hook input is larger than {MAX_INPUT} bytes"));
    }
    serde_json::from_slice(&buf).map_err(|e| format!("the hook input is not JSON: {e}"))
}

/// A tool call as a runtime described it.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The hook event (`PreToolUse`, `beforeShellExecution`, …).
    pub event: String,
    /// Where it comes from.
    pub origin: gate::Origin,
    /// What it does (several for a patch touching several files).
    pub calls: Vec<Call>,
    /// The runtime's own permission rule for exactly this call, where it
    /// has one (Claude Code's `updatedPermissions`).
    pub rule: Option<Value>,
    /// The tool call's input as the runtime sent it: its file calls show
    /// it to the humans who decide ([`shown`]).
    pub input: Option<Value>,
}

#[cfg(test)]
impl Parsed {
    /// The action strings the daemon is asked about, in order.
    pub fn action_strings(&self) -> Vec<String> {
        self.calls
            .iter()
            .map(|c| c.mapped().action_string())
            .collect()
    }
}

/// What the hook prints and how it exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Standard output (one line of JSON, or nothing).
    pub stdout: Option<String>,
    /// Standard error.
    pub stderr: Option<String>,
    /// Exit code.
    pub code: u8,
}

impl Reply {
    /// JSON on stdout, exit 0.
    pub fn json(v: &Value) -> Reply {
        Reply {
            stdout: Some(v.to_string()),
            stderr: None,
            code: 0,
        }
    }
}

/// One runtime's hook contract.
pub trait Runtime {
    /// Reads the runtime's input.
    fn parse(&self, input: &Value) -> Result<Parsed, String>;
    /// The runtime's output for an answer; `parsed` is `None` when the
    /// input could not be read.
    fn reply(&self, parsed: Option<&Parsed>, answer: &Answer) -> Reply;
}

/// Reads, decides within the budget, prints, exits.
pub async fn serve(args: &HookArgs, rt: &dyn Runtime) -> Exit {
    let (parsed, answer) = answer_input(args, rt, |_| gate::Waiting::Wait).await;
    emit(&rt.reply(parsed.as_ref(), &answer))
}

/// The answer for the input on stdin, and the call it was for.
pub async fn answer_input(
    args: &HookArgs,
    rt: &dyn Runtime,
    waiting: impl Fn(&Parsed) -> gate::Waiting,
) -> (Option<Parsed>, Answer) {
    answer_read(args, rt, read_stdin().await, waiting).await
}

/// [`answer_input`] for an input already read.
pub async fn answer_read(
    args: &HookArgs,
    rt: &dyn Runtime,
    input: Result<Value, String>,
    waiting: impl Fn(&Parsed) -> gate::Waiting,
) -> (Option<Parsed>, Answer) {
    let parsed = match input {
        Ok(input) => rt.parse(&input).map(unclear_paths),
        Err(e) => Err(e),
    };
    let (parsed, mut answer) = match parsed {
        Ok(p) => {
            let answer = bounded(args, &p, waiting(&p))
                .await
                .capped(p.origin.unsure.as_deref());
            (Some(p), answer)
        }
        Err(e) => (None, fail(args, &e)),
    };
    // A runtime rule made from a grant (Claude Code's session rule) is
    // consulted only where the hook lets the runtime ask its user, which
    // it does with `--on-timeout ask` or `--on-error ask`: there the rule
    // would allow a call the grant no longer does (a spent count, a
    // revocation, an expiry), or that nobody could decide.
    if args.on_timeout == Fallback::Ask || args.on_error == Fallback::Ask {
        answer.by_grant = false;
    }
    (parsed, answer)
}

/// `p`, left to an operator ([`gate::Origin::unsure`]) when one of its
/// calls names a file by a path that may lead elsewhere than it is asked
/// as ([`Call::unclear_path`]): a line break lets a path read as another
/// to a rule (`/srv/prod/app.env` and a second line, which a pattern's
/// `.` does not cross).
fn unclear_paths(mut p: Parsed) -> Parsed {
    if p.origin.unsure.is_none()
        && let Some(why) = p.calls.iter().find_map(Call::unclear_path)
    {
        p.origin.unsure = Some(why.to_owned());
    }
    p
}

/// Asks the daemon, answering the fallback itself before the runtime's
/// own timeout could kill the hook.
pub async fn bounded(args: &HookArgs, p: &Parsed, waiting: gate::Waiting) -> Answer {
    let budget = args.wait_for() + Duration::from_secs(4);
    let result = match tokio::time::timeout(
        budget,
        gate::decide(args, &p.origin, &p.calls, p.input.as_ref(), waiting),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {}s", budget.as_secs())),
    };
    match result {
        Ok(a) => a,
        Err(e) => fail(args, &e),
    }
}

fn fail(args: &HookArgs, e: &str) -> Answer {
    eprintln!("actiongate hook: {}", one_line(e));
    Answer::failed(args.on_error, e)
}

/// Prints a reply and returns its exit code.
pub fn emit(r: &Reply) -> Exit {
    if let Some(out) = &r.stdout {
        println!("{out}");
    }
    if let Some(err) = &r.stderr {
        eprintln!("{err}");
    }
    match r.code {
        0 => Exit::Ok,
        2 => Exit::Usage,
        _ => Exit::Denied,
    }
}

/// The string field `key` of the input.
pub fn text<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

/// Fails unless the input's event is one of `events` (a missing event
/// name is taken as the first).
pub fn event_of(input: &Value, key: &str, events: &[&str]) -> Result<String, String> {
    match text(input, key) {
        None => Ok(events[0].to_owned()),
        Some(ev) if events.contains(&ev) => Ok(ev.to_owned()),
        Some(ev) => Err(format!(
            "this hook answers {} events, not {ev}",
            events.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    /// A line break in a written path (`/srv/prod/app.env` and `.bak` on
    /// a second line) slips past a deny pattern whose `.` stops at it: the
    /// call is left to an operator whatever rule allows it.
    #[test]
    fn a_path_with_a_control_character_is_left_to_an_operator() {
        let parse = |path: &str| {
            let hook = json!({"hook_event_name": "PreToolUse", "tool_name": "Write",
                "tool_input": {"file_path": path, "content": "x"}, "cwd": "/p"});
            unclear_paths(claude_code::ClaudeCode.parse(&hook).unwrap())
        };
        for odd in [
            "/srv/prod/app.env\n.bak",
            "/srv/prod\r/app.env",
            "/srv/x\u{7}y",
        ] {
            assert!(parse(odd).origin.unsure.is_some(), "{odd:?}");
        }
        assert!(parse("/srv/prod/app.env").origin.unsure.is_none());
        // A patch header's path climbing out of a step with a `:`.
        let patch = json!({"hook_event_name": "PreToolUse", "tool_name": "apply_patch",
            "tool_input": {"command":
                "*** Begin Patch\n*** Add File: /srv/prod/app.env:/../../../p/z\n+x\n*** End Patch\n"},
            "cwd": "/p"});
        let p = unclear_paths(codex::Codex.parse(&patch).unwrap());
        assert!(p.origin.unsure.unwrap().contains("`:`"), "{:?}", p.calls);
        assert!(parse("../x").origin.unsure.is_none());
    }
}
