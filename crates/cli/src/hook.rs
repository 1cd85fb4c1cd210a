//! `actiongate hook claude-code`: Claude Code's PreToolUse hook. It maps the
//! tool call on stdin to an action string, asks the daemon (waiting for a
//! human when the answer is ask) and prints Claude Code's decision. It never
//! allows on error: whatever goes wrong, it prints valid JSON that denies
//! (or asks, if so configured) and exits 0 so Claude Code reads it.

use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use super::Exit;
use super::http::{Api, ClientError, Conn};
use super::output::one_line;

/// `hook` subcommands.
#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Claude Code PreToolUse hook: reads the tool call on stdin, prints the decision.
    ClaudeCode(ClaudeCodeArgs),
}

/// What to answer when actiongate cannot give an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Fallback {
    /// Refuse the tool call.
    Deny,
    /// Let Claude Code ask its user.
    Ask,
}

impl Fallback {
    fn decision(self) -> &'static str {
        match self {
            Fallback::Deny => "deny",
            Fallback::Ask => "ask",
        }
    }
}

/// Flags of `hook claude-code`.
#[derive(Debug, Args)]
pub struct ClaudeCodeArgs {
    /// Where the daemon is; the key must be an agent key.
    #[command(flatten)]
    pub conn: Conn,
    /// Seconds to wait for a human when the policy asks (keep it below the
    /// hook's `timeout` in settings.json, 60 s by default).
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

/// Largest hook input read (Write carries whole files).
const MAX_INPUT: u64 = 16 * 1024 * 1024;
/// The daemon's longest `reason`.
const MAX_REASON: usize = 4000;
/// The daemon's tool names: 1-128 of `A-Z a-z 0-9 _ - .`.
const MAX_TOOL: usize = 128;

/// A tool call mapped to an action: tool and detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapped {
    /// The daemon's tool name.
    pub tool: String,
    /// The detail.
    pub detail: String,
}

/// Claude Code's decision for the tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// `allow`, `deny` or `ask`.
    pub decision: &'static str,
    /// Why, shown to the user (allow, ask) or to Claude (deny).
    pub reason: String,
}

impl Decision {
    /// The hook's stdout.
    pub fn to_json(&self) -> Value {
        json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": self.decision,
                "permissionDecisionReason": self.reason,
            }
        })
    }
}

/// Replaces characters outside the daemon's tool charset with `_`.
pub fn sanitize_tool(name: &str) -> String {
    let mut t: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_TOOL)
        .collect();
    if t.is_empty() {
        t.push_str("unknown");
    }
    t
}

fn field<'a>(input: &'a Value, tool: &str, key: &str) -> Result<&'a str, String> {
    input
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the {tool} call has no tool_input.{key}"))
}

/// Maps a Claude Code tool call to the daemon's tool and detail (see the
/// README's table). Tool names stay those of the `readonly` preset.
pub fn map_tool(tool_name: &str, input: &Value) -> Result<Mapped, String> {
    let m = |tool: &str, detail: String| Mapped {
        tool: tool.to_owned(),
        detail,
    };
    Ok(match tool_name {
        "Bash" => m("bash", field(input, tool_name, "command")?.to_owned()),
        "Edit" | "MultiEdit" => m(
            "file",
            format!("edit {}", field(input, tool_name, "file_path")?),
        ),
        "Write" => m(
            "file",
            format!("write {}", field(input, tool_name, "file_path")?),
        ),
        "NotebookEdit" => m(
            "file",
            format!(
                "notebook_edit {}",
                field(input, tool_name, "notebook_path")?
            ),
        ),
        "Read" => m("Read", field(input, tool_name, "file_path")?.to_owned()),
        "Glob" => {
            let pattern = field(input, tool_name, "pattern")?;
            let detail = match input.get("path").and_then(Value::as_str) {
                Some(path) if !path.is_empty() && !pattern.starts_with('/') => {
                    format!("{}/{pattern}", path.trim_end_matches('/'))
                }
                _ => pattern.to_owned(),
            };
            m("Glob", detail)
        }
        "Grep" => m("Grep", field(input, tool_name, "pattern")?.to_owned()),
        "WebFetch" => m("WebFetch", field(input, tool_name, "url")?.to_owned()),
        "WebSearch" => m("WebSearch", field(input, tool_name, "query")?.to_owned()),
        // MCP tools (`mcp__server__tool`) and every other tool: the name,
        // and the input as compact JSON.
        other => m(&sanitize_tool(other), input.to_string()),
    })
}

/// A reason for the human: where the call comes from.
fn reason_of(hook: &Value) -> String {
    let mut r = "Claude Code".to_owned();
    if let Some(cwd) = hook.get("cwd").and_then(Value::as_str) {
        r.push_str(&format!(" in {cwd}"));
    }
    if let Some(sid) = hook.get("session_id").and_then(Value::as_str) {
        r.push_str(&format!(" (session {sid})"));
    }
    truncate(&r, MAX_REASON)
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// Claude Code's decision for a settled (or still pending) action.
pub fn decision_for(action: &Value, on_timeout: Fallback, waited: u64) -> Decision {
    let status = action.get("status").and_then(Value::as_str).unwrap_or("");
    let by = action
        .get("decided_by")
        .and_then(Value::as_str)
        .unwrap_or("");
    let policy_reason = action
        .pointer("/decision/reason")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let note = action
        .get("decision_note")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let who = if by == "policy" {
        "by policy".to_owned()
    } else if let Some(g) = by.strip_prefix("grant:") {
        format!("by grant {g}")
    } else {
        "by an operator".to_owned()
    };
    let (decision, reason) = match status {
        "approved" | "running" | "completed" => {
            let why = if by == "policy" {
                policy_reason
            } else {
                note.unwrap_or_default()
            };
            ("allow", with_why(&format!("allowed {who}"), &why))
        }
        "denied" => {
            let why = if by == "policy" {
                policy_reason
            } else {
                note.unwrap_or_else(|| "no reason given".to_owned())
            };
            ("deny", with_why(&format!("denied {who}"), &why))
        }
        "expired" => (
            "deny",
            "no operator decided before the deadline (expired)".to_owned(),
        ),
        "cancelled" => ("deny", "the request was cancelled".to_owned()),
        "failed" => ("deny", "the action failed".to_owned()),
        _ => (
            on_timeout.decision(),
            format!("no operator decided within {waited}s; the request was withdrawn"),
        ),
    };
    Decision {
        decision,
        reason: format!("actiongate: {}", one_line(&reason)),
    }
}

fn with_why(head: &str, why: &str) -> String {
    if why.is_empty() {
        head.to_owned()
    } else {
        format!("{head}: {why}")
    }
}

/// Reads stdin, with a size limit.
async fn read_stdin() -> Result<Value, String> {
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

/// Asks the daemon about one hook input.
async fn decide(args: &ClaudeCodeArgs, hook: &Value) -> Result<Decision, String> {
    if let Some(ev) = hook.get("hook_event_name").and_then(Value::as_str)
        && ev != "PreToolUse"
    {
        return Err(format!("this hook answers PreToolUse events, not {ev}"));
    }
    let tool_name = hook
        .get("tool_name")
        .and_then(Value::as_str)
        .ok_or("the hook input has no tool_name")?;
    let input = hook.get("tool_input").cloned().unwrap_or(json!({}));
    let mapped = map_tool(tool_name, &input)?;
    let api = Api::with_timeouts(&args.conn, Duration::from_secs(3), Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    api.require_key().map_err(|e| e.to_string())?;
    let mut body = json!({
        "tool": mapped.tool,
        "detail": mapped.detail,
        "reason": reason_of(hook),
    });
    // The same tool call asked twice is one action.
    if let (Some(sid), Some(tid)) = (
        hook.get("session_id").and_then(Value::as_str),
        hook.get("tool_use_id").and_then(Value::as_str),
    ) {
        body["idempotency_key"] = json!(truncate(&format!("claude-code:{sid}:{tid}"), 256));
    }
    let (action, _) = api
        .create_action(&body, Duration::from_secs(args.wait))
        .await
        .map_err(|e| describe(&e))?;
    let decision = decision_for(&action, args.on_timeout, args.wait);
    if action.get("status").and_then(Value::as_str) == Some("pending")
        && let Some(id) = action.get("id").and_then(Value::as_str)
        && let Err(e) = api.cancel(id).await
    {
        // A decision may have landed between the last poll and the cancel.
        if let ClientError::Api(p) = &e
            && p.status == 409
            && let Ok(now) = api
                .get(&format!("/v1/actions/{}", super::http::path_segment(id)))
                .await
        {
            return Ok(decision_for(&now, args.on_timeout, args.wait));
        }
        eprintln!("actiongate hook: could not withdraw action {id}: {e}");
    }
    Ok(decision)
}

fn describe(e: &ClientError) -> String {
    match e {
        ClientError::Unreachable(m) => format!("the daemon is unreachable ({m})"),
        other => other.to_string(),
    }
}

/// `hook claude-code`: always prints a decision and exits 0.
pub async fn claude_code(args: ClaudeCodeArgs) -> Exit {
    // Past this the hook answers the fallback itself, before Claude Code's
    // own timeout kills it.
    let budget = Duration::from_secs(args.wait) + Duration::from_secs(4);
    let result = match read_stdin().await {
        Ok(hook) => match tokio::time::timeout(budget, decide(&args, &hook)).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {}s", budget.as_secs())),
        },
        Err(e) => Err(e),
    };
    let decision = match result {
        Ok(d) => d,
        Err(e) => {
            eprintln!("actiongate hook: {}", one_line(&e));
            Decision {
                decision: args.on_error.decision(),
                reason: format!(
                    "actiongate: {} (failing closed: {})",
                    one_line(&e),
                    args.on_error.decision()
                ),
            }
        }
    };
    println!("{}", decision.to_json());
    Exit::Ok
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tools_map_to_the_readonly_preset_names() {
        let cases = [
            ("Bash", json!({"command": "ls -la"}), "bash", "ls -la"),
            (
                "Edit",
                json!({"file_path": "/r/a.rs", "old_string": "a", "new_string": "b"}),
                "file",
                "edit /r/a.rs",
            ),
            (
                "MultiEdit",
                json!({"file_path": "/r/a.rs", "edits": []}),
                "file",
                "edit /r/a.rs",
            ),
            (
                "Write",
                json!({"file_path": "/r/b", "content": "x"}),
                "file",
                "write /r/b",
            ),
            (
                "NotebookEdit",
                json!({"notebook_path": "/r/n.ipynb", "new_source": "x"}),
                "file",
                "notebook_edit /r/n.ipynb",
            ),
            ("Read", json!({"file_path": "/r/a"}), "Read", "/r/a"),
            (
                "Glob",
                json!({"pattern": "**/*.rs", "path": "/r/"}),
                "Glob",
                "/r/**/*.rs",
            ),
            ("Glob", json!({"pattern": "**/*.rs"}), "Glob", "**/*.rs"),
            (
                "Grep",
                json!({"pattern": "fn main", "path": "/r"}),
                "Grep",
                "fn main",
            ),
            (
                "WebFetch",
                json!({"url": "https://x.test/", "prompt": "p"}),
                "WebFetch",
                "https://x.test/",
            ),
            (
                "WebSearch",
                json!({"query": "rust sse"}),
                "WebSearch",
                "rust sse",
            ),
            (
                "mcp__github__create_issue",
                json!({"title": "t"}),
                "mcp__github__create_issue",
                "{\"title\":\"t\"}",
            ),
            (
                "mcp__my server__do!",
                json!({}),
                "mcp__my_server__do_",
                "{}",
            ),
        ];
        for (name, input, tool, detail) in cases {
            let m = map_tool(name, &input).unwrap();
            assert_eq!(
                (m.tool.as_str(), m.detail.as_str()),
                (tool, detail),
                "{name}"
            );
        }
        assert!(map_tool("Bash", &json!({})).is_err());
        assert_eq!(sanitize_tool(""), "unknown");
        assert_eq!(sanitize_tool(&"x".repeat(300)).len(), 128);
    }

    #[test]
    fn decisions_follow_the_action() {
        let d = decision_for(
            &json!({"status": "denied", "decided_by": "key:k1", "decision_note": "not on main"}),
            Fallback::Deny,
            55,
        );
        assert_eq!(d.decision, "deny");
        assert_eq!(d.reason, "actiongate: denied by an operator: not on main");
        let d = decision_for(
            &json!({"status": "approved", "decided_by": "policy", "decision": {"reason": "allowed by profile"}}),
            Fallback::Deny,
            55,
        );
        assert_eq!(
            (d.decision, d.reason.as_str()),
            ("allow", "actiongate: allowed by policy: allowed by profile")
        );
        assert_eq!(
            decision_for(&json!({"status": "expired"}), Fallback::Ask, 5).decision,
            "deny"
        );
        assert_eq!(
            decision_for(&json!({"status": "pending"}), Fallback::Ask, 5).decision,
            "ask"
        );
        assert_eq!(
            decision_for(&json!({"status": "pending"}), Fallback::Deny, 5).decision,
            "deny"
        );
    }
}
