//! Claude Code (checked against `@anthropic-ai/claude-code` 2.1.197): the
//! `PreToolUse` and `PermissionRequest` command hooks. Input on stdin:
//! `session_id`, `cwd`, `hook_event_name`, `tool_name`, `tool_input`,
//! `tool_use_id`. Output (exit 0, one line of JSON):
//!
//! - `PreToolUse`: `hookSpecificOutput.permissionDecision` = `allow`,
//!   `deny`, `ask` or (`--defer`, for headless `claude -p` runs) `defer`,
//!   with `permissionDecisionReason`.
//! - `PermissionRequest` (Claude Code is about to show its permission
//!   dialog): `hookSpecificOutput.decision.behavior` = `allow` (with
//!   `updatedPermissions` adding a session rule for exactly this call when
//!   a standing grant allowed it) or `deny` with `message`; when nobody
//!   decided and the timeout fallback is `ask`, nothing, so that Claude
//!   Code shows its own dialog.
//! - `PostToolUse` (the tool ran): the call is reported to `POST /v1/runs`
//!   with its session, so a run no allow or approval covered raises
//!   `action.undecided`; nothing on stdout, exit 0 (1, with the reason on
//!   stderr, when the report failed: the tool has run either way).

use clap::Args;
use serde_json::{Value, json};

use std::time::Duration;

use super::gate::{Answer, Origin, Verdict, Waiting, session_for};
use super::map::{self, Call, any_field, field};
use super::{HookArgs, Parsed, Reply, Runtime, answer_read, emit, event_of, read_stdin, text};
use crate::Exit;
use crate::http::Api;
use crate::output::one_line;

/// Flags of `hook claude-code`.
#[derive(Debug, Args)]
pub struct ClaudeCodeArgs {
    /// Connection, wait and fallbacks.
    #[command(flatten)]
    pub hook: HookArgs,
    /// For headless `claude -p` runs: when the policy asks, answer `defer`
    /// at once (the run stops with the call pending and the question stays
    /// in the queue); `claude -p --resume <session>` asks again and gets
    /// the operator's decision. Only in the `default` and `plan`
    /// permission modes; in others the hook waits as without it.
    #[arg(long, env = "ACTIONGATE_HOOK_DEFER")]
    pub defer: bool,
}

/// The Claude Code contract.
pub struct ClaudeCode;

/// Maps a Claude Code tool call (the tool names of `sdk-tools.d.ts`).
/// A path is trimmed as Claude Code trims it (JavaScript's `trim`) before
/// it resolves it: a call made from `REPL` reaches the hook as the script
/// wrote it, and so does `Glob`'s `path`.
pub fn call_of(tool_name: &str, input: &Value) -> Result<Call, String> {
    let path = |key: &str| -> Result<String, String> {
        Ok(map::js_trim(field(input, tool_name, key)?).to_owned())
    };
    let file = |verb: &'static str, key: &str| -> Result<Call, String> {
        Ok(Call::File {
            verb,
            path: path(key)?,
        })
    };
    Ok(match tool_name {
        "Bash" => Call::Shell(field(input, tool_name, "command")?.to_owned()),
        "Edit" | "MultiEdit" => file(map::edit_verb(input, "old_string"), "file_path")?,
        "Write" => file("write", "file_path")?,
        "NotebookEdit" => file("notebook_edit", "notebook_path")?,
        "Read" => Call::Read(path("file_path")?),
        "Glob" => map::glob(
            field(input, tool_name, "pattern")?,
            text(input, "path").map(map::js_trim),
        ),
        "Grep" => Call::Grep(field(input, tool_name, "pattern")?.to_owned()),
        "WebFetch" => Call::Fetch(field(input, tool_name, "url")?.to_owned()),
        "WebSearch" => Call::Search(any_field(input, tool_name, &["query"])?.to_owned()),
        // The server's resource text is a stranger's, as through the proxy;
        // so are the names and descriptions a listing shows.
        "ReadMcpResourceTool" | "ReadMcpResourceDirTool" => map::mcp_resource(
            Some(field(input, tool_name, "server")?),
            Some(field(input, tool_name, "uri")?),
        ),
        "ListMcpResourcesTool" => map::mcp_resource(text(input, "server"), None),
        // A PowerShell line: no analyser here reads PowerShell, so it is
        // asked as `tool:powershell:<command>` and only an operator's
        // approval of it allows it ([`unsure`]).
        "PowerShell" => Call::ShellOf {
            tool: "powershell".to_owned(),
            line: field(input, tool_name, "command")?.to_owned(),
        },
        other => map::mcp_double_underscore(other, input).unwrap_or_else(|| Call::Other {
            name: other.to_owned(),
            input: input.clone(),
        }),
    })
}

/// The calls of a Claude Code tool call: [`call_of`]'s, and for `Monitor`
/// (a watch on a shell command's output, or on a WebSocket) the command
/// as a shell line and the socket as a fetch of its URL, each asked.
pub fn calls_of(tool_name: &str, input: &Value) -> Result<Vec<Call>, String> {
    if tool_name != "Monitor" {
        return Ok(vec![call_of(tool_name, input)?]);
    }
    let mut calls = Vec::new();
    if let Some(command) = input.get("command").filter(|c| !c.is_null()) {
        let command = command
            .as_str()
            .ok_or("the Monitor call's command is not a string")?;
        calls.push(Call::Shell(command.to_owned()));
    }
    if let Some(ws) = input.get("ws").filter(|w| !w.is_null()) {
        calls.push(Call::Fetch(field(ws, tool_name, "url")?.to_owned()));
    }
    if calls.is_empty() {
        calls.push(Call::Other {
            name: tool_name.to_owned(),
            input: input.clone(),
        });
    }
    Ok(calls)
}

/// Why a Claude Code call may do more than its action says: a PowerShell
/// line, which no analyser here reads; a command asking to run outside
/// Claude Code's sandbox (`dangerouslyDisableSandbox`), which Claude Code
/// itself asks its user about and an allow from the hook would skip.
fn unsure(tool_name: &str, input: &Value) -> Option<String> {
    if tool_name == "PowerShell" {
        return Some(
            "a PowerShell command, which actiongate cannot analyse; a human must read it"
                .to_owned(),
        );
    }
    // Claude Code reads the flag leniently (`"true"` is true): anything
    // but absent or plainly false counts.
    let flag = input.get("dangerouslyDisableSandbox");
    (!matches!(flag, None | Some(Value::Null | Value::Bool(false)))).then(|| {
        "Claude Code is asked to run this command outside its sandbox (dangerouslyDisableSandbox)"
            .to_owned()
    })
}

/// The calls of a hook input's tool call, relative paths joined with its
/// `cwd` as Claude Code resolves them (a `PostToolUse` report must name
/// what `PreToolUse` asked about, or an allowed run would look undecided).
fn calls_in(hook: &Value, tool_name: &str, input: &Value) -> Result<Vec<Call>, String> {
    Ok(map::in_dir(calls_of(tool_name, input)?, text(hook, "cwd")))
}

/// Claude Code's permission rule for exactly this call: the command or
/// the file path, written so that it means only that (other tools get
/// none: a rule would cover every call). Claude Code reads `*` in a Bash
/// rule, and `*`, `?`, `[` in a path rule, as wildcards, and path rules
/// as gitignore patterns: a leading `/` is the project's root (`//` the
/// file system's), and a relative name with no `/` matches at any depth
/// (`README.md` would cover every `README.md` below). So a file is always
/// written as `//` and its absolute path, resolved under the working
/// directory `cwd`; a call whose text would read as more than itself, or
/// whose file is not known absolutely (no absolute `cwd`, a `~` path),
/// gets no rule.
fn rule_for(tool_name: &str, input: &Value, cwd: Option<&str>) -> Option<Value> {
    let content = rule_content(tool_name, input, cwd)?;
    // A control character (a line break above all) could read as the end
    // of one rule and the start of another.
    if content.chars().any(char::is_control) {
        return None;
    }
    Some(json!({"toolName": tool_name, "ruleContent": content}))
}

/// The text of [`rule_for`]'s rule, before it is checked.
fn rule_content(tool_name: &str, input: &Value, cwd: Option<&str>) -> Option<String> {
    let content = match tool_name {
        "Bash" => {
            let command = text(input, "command")?;
            if command.contains('*') {
                return None;
            }
            command.to_owned()
        }
        "Edit" | "MultiEdit" | "Write" | "Read" => {
            let path = text(input, "file_path")?;
            // gitignore drops trailing blanks.
            if path.contains(['*', '?', '[', '\\']) || path.ends_with(char::is_whitespace) {
                return None;
            }
            let absolute = if path.starts_with('/') {
                path.to_owned()
            } else if path.starts_with('~') {
                return None;
            } else {
                let cwd = cwd.filter(|c| c.starts_with('/'))?;
                format!("{}/{path}", cwd.trim_end_matches('/'))
            };
            format!("/{}", map::normalize_path(&absolute))
        }
        _ => return None,
    };
    Some(content)
}

impl Runtime for ClaudeCode {
    fn parse(&self, hook: &Value) -> Result<Parsed, String> {
        let event = event_of(
            hook,
            "hook_event_name",
            &["PreToolUse", "PermissionRequest"],
        )?;
        let tool_name = text(hook, "tool_name").ok_or("the hook input has no tool_name")?;
        let input = hook.get("tool_input").cloned().unwrap_or(json!({}));
        Ok(Parsed {
            event,
            origin: Origin {
                runtime: "claude-code",
                label: "Claude Code",
                session: text(hook, "session_id").map(str::to_owned),
                call_id: text(hook, "tool_use_id").map(str::to_owned),
                cwd: text(hook, "cwd").map(str::to_owned),
                // Where a grep searches.
                dir: map::grep_dir(tool_name == "Grep", text(hook, "cwd"), &input, &["path"]),
                after_pre_tool: false,
                unsure: unsure(tool_name, &input),
            },
            calls: calls_in(hook, tool_name, &input)?,
            rule: rule_for(tool_name, &input, text(hook, "cwd")),
            input: Some(input),
        })
    }

    fn reply(&self, parsed: Option<&Parsed>, a: &Answer) -> Reply {
        if let Some(p) = parsed
            && p.event == "PermissionRequest"
        {
            let decision = match a.verdict {
                Verdict::Allow => {
                    let mut d = json!({"behavior": "allow"});
                    if a.by_grant
                        && let Some(rule) = &p.rule
                    {
                        d["updatedPermissions"] = json!([{
                            "type": "addRules",
                            "rules": [rule],
                            "behavior": "allow",
                            "destination": "session",
                        }]);
                    }
                    d
                }
                Verdict::Deny => json!({"behavior": "deny", "message": a.reason}),
                // Claude Code shows its own dialog.
                Verdict::Ask | Verdict::Defer => {
                    return Reply {
                        stdout: None,
                        stderr: Some(a.reason.clone()),
                        code: 0,
                    };
                }
            };
            return Reply::json(&json!({
                "hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}
            }));
        }
        let decision = match a.verdict {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
            Verdict::Ask => "ask",
            Verdict::Defer => "defer",
        };
        Reply::json(&json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": decision,
                "permissionDecisionReason": a.reason,
            }
        }))
    }
}

/// The `POST /v1/runs` bodies of a `PostToolUse` input: one per action
/// its call maps to, in the session its `PreToolUse` was asked in.
pub fn run_reports(hook: &Value) -> Result<Vec<Value>, String> {
    let tool_name = text(hook, "tool_name").ok_or("the hook input has no tool_name")?;
    let input = hook.get("tool_input").cloned().unwrap_or(json!({}));
    let session = text(hook, "session_id").map(session_for);
    Ok(calls_in(hook, tool_name, &input)?
        .iter()
        .map(|call| {
            let mapped = call.mapped();
            let mut body =
                json!({"tool": mapped.tool, "detail": mapped.detail, "runtime": "claude-code"});
            if let Some(sid) = &session {
                body["session"] = json!(sid);
            }
            body
        })
        .collect())
}

/// Reports a `PostToolUse` input's run to the daemon.
async fn report(args: &HookArgs, hook: &Value) -> Result<(), String> {
    let bodies = run_reports(hook)?;
    let conn = args.connection()?;
    let api = Api::with_timeouts(&conn, Duration::from_secs(3), Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    api.require_key().map_err(|e| e.to_string())?;
    for body in bodies {
        api.post("/v1/runs", &body)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Whether a `defer` answer to `hook` cannot let its call run: Claude Code
/// ignores `defer` where it does not apply (a message of several tool
/// calls, an interactive session) and goes on to its own permissions,
/// which ask a human only in the `default` and `plan` modes. In any other
/// mode (`acceptEdits`, `bypassPermissions`, `dontAsk`, or none sent) the
/// hook waits for the decision as it does without `--defer`.
fn defer_is_honoured(hook: &Value) -> bool {
    matches!(text(hook, "permission_mode"), Some("default" | "plan"))
}

/// `hook claude-code`: prints Claude Code's JSON and exits 0 (a
/// `PostToolUse` report prints nothing).
pub async fn run(args: ClaudeCodeArgs) -> Exit {
    let input = read_stdin().await;
    if let Ok(hook) = &input
        && text(hook, "hook_event_name") == Some("PostToolUse")
    {
        return match report(&args.hook, hook).await {
            Ok(()) => Exit::Ok,
            Err(e) => {
                eprintln!(
                    "actiongate hook: the run was not reported: {}",
                    one_line(&e)
                );
                Exit::Denied
            }
        };
    }
    let defer = args.defer && input.as_ref().is_ok_and(defer_is_honoured);
    let (parsed, answer) = answer_read(&args.hook, &ClaudeCode, input, |p| {
        if defer && p.event == "PreToolUse" {
            Waiting::Defer
        } else {
            Waiting::Wait
        }
    })
    .await;
    emit(&ClaudeCode.reply(parsed.as_ref(), &answer))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tools_map_to_the_preset_names() {
        let cases = [
            ("Bash", json!({"command": "ls -la"}), "tool:bash:ls -la"),
            (
                "MultiEdit",
                json!({"file_path": "/r/a.rs", "edits": []}),
                "tool:file:edit /r/a.rs",
            ),
            (
                "Write",
                json!({"file_path": "/r/b", "content": "x"}),
                "tool:file:write /r/b",
            ),
            (
                "NotebookEdit",
                json!({"notebook_path": "/r/n.ipynb", "new_source": "x"}),
                "tool:file:notebook_edit /r/n.ipynb",
            ),
            (
                "Glob",
                json!({"pattern": "**/*.rs", "path": "/r/"}),
                "tool:Glob:/r/**/*.rs",
            ),
            (
                "mcp__github__create_issue",
                json!({"title": "t"}),
                r#"tool:mcp__github__create_issue:{"title":"t"}"#,
            ),
            ("Task", json!({}), "tool:Task:{}"),
        ];
        for (name, input, want) in cases {
            assert_eq!(
                call_of(name, &input).unwrap().mapped().action_string(),
                want,
                "{name}"
            );
        }
        assert!(call_of("Bash", &json!({})).is_err());
    }

    /// The table the TypeScript client's Claude adapters are checked
    /// against too (`clients/typescript/test/claude-tools.test.mjs`): one
    /// profile must govern Claude Code and the Agent SDK alike.
    #[test]
    fn the_shared_table_of_claude_calls() {
        let table: Value =
            serde_json::from_str(include_str!("../../tests/claude_calls.json")).unwrap();
        for case in table["calls"].as_array().unwrap() {
            let name = case["tool_name"].as_str().unwrap();
            let input = &case["tool_input"];
            let got = calls_of(name, input)
                .map(|calls| map::placed(calls, case["cwd"].as_str(), case["home"].as_str()));
            if case["error"] == json!(true) {
                assert!(got.is_err(), "{case}: {got:?}");
                continue;
            }
            let got = got.unwrap();
            let unclear = got.iter().any(|c| c.unclear_path().is_some());
            let got: Vec<Value> = got
                .iter()
                .map(|c| {
                    let m = c.mapped();
                    json!([m.tool, m.detail])
                })
                .collect();
            assert_eq!(Value::from(got), case["actions"], "{case}");
            let caution = case["caution"] == json!(true);
            assert_eq!(unsure(name, input).is_some() || unclear, caution, "{case}");
        }
    }

    #[test]
    fn permission_requests_answer_behavior_and_a_session_rule_for_grants() {
        let p = ClaudeCode
            .parse(
                &json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash",
                "tool_input": {"command": "cargo test"}}),
            )
            .unwrap();
        let allow = Answer {
            verdict: Verdict::Allow,
            reason: "r".into(),
            by_grant: true,
            by_operator: false,
        };
        let out: Value =
            serde_json::from_str(&ClaudeCode.reply(Some(&p), &allow).stdout.unwrap()).unwrap();
        assert_eq!(
            out,
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {
                "behavior": "allow",
                "updatedPermissions": [{"type": "addRules",
                    "rules": [{"toolName": "Bash", "ruleContent": "cargo test"}],
                    "behavior": "allow", "destination": "session"}]}}})
        );
        let ask = Answer {
            verdict: Verdict::Ask,
            reason: "r".into(),
            by_grant: false,
            by_operator: false,
        };
        assert_eq!(ClaudeCode.reply(Some(&p), &ask).stdout, None);
    }

    /// A session rule means the call and nothing more in Claude Code's own
    /// rule syntax: no wildcard from the call's text, an absolute path as
    /// `//path` (a single `/` is the project's root there).
    #[test]
    fn session_rules_mean_only_the_call_in_claude_codes_syntax() {
        let rule = |tool: &str, input: Value| rule_for(tool, &input, Some("/home/u/proj/"));
        assert_eq!(rule("Bash", json!({"command": "rm -f *.log"})), None);
        assert_eq!(rule("Bash", json!({"command": "npm run test:*"})), None);
        assert_eq!(
            rule("Edit", json!({"file_path": "/etc/hosts"})),
            Some(json!({"toolName": "Edit", "ruleContent": "//etc/hosts"}))
        );
        // A relative name is anchored: `README.md` alone would be every
        // README.md below the working directory.
        assert_eq!(
            rule("Edit", json!({"file_path": "README.md"})),
            Some(json!({"toolName": "Edit", "ruleContent": "//home/u/proj/README.md"}))
        );
        assert_eq!(
            rule("Read", json!({"file_path": "notes/../todo.md"})),
            Some(json!({"toolName": "Read", "ruleContent": "//home/u/proj/todo.md"}))
        );
        for path in [
            "/srv/app/*.env",
            "/srv/app/?",
            "/srv/[a]/x",
            "C:\\x",
            "~/.bashrc",
            "x.md ",
            "/srv/a\n/etc/hosts",
            "/srv/a\r",
        ] {
            assert_eq!(rule("Write", json!({"file_path": path})), None, "{path}");
        }
        // A line break would be read as several rules.
        assert_eq!(rule("Bash", json!({"command": "ls\nrm -rf ~"})), None);
        for cwd in [None, Some("proj")] {
            assert_eq!(
                rule_for("Edit", &json!({"file_path": "README.md"}), cwd),
                None
            );
        }
        assert_eq!(rule("Glob", json!({"pattern": "x"})), None);
    }

    fn pre(tool: &str, input: Value, cwd: Option<&str>) -> Parsed {
        let mut hook = json!({"hook_event_name": "PreToolUse", "session_id": "s1",
            "tool_name": tool, "tool_input": input});
        if let Some(cwd) = cwd {
            hook["cwd"] = json!(cwd);
        }
        ClaudeCode.parse(&hook).unwrap()
    }

    /// A relative path is the file Claude Code touches under its working
    /// directory: the action names that file, so a rule over absolute
    /// paths sees it, `..` and all.
    #[test]
    fn relative_paths_are_joined_with_the_working_directory() {
        let cwd = Some("/home/u/proj");
        let cases = [
            (
                "Write",
                json!({"file_path": "../../../srv/prod/app.env"}),
                "tool:file:write /srv/prod/app.env",
            ),
            (
                "Edit",
                json!({"file_path": "src/main.rs"}),
                "tool:file:edit /home/u/proj/src/main.rs",
            ),
            (
                "NotebookEdit",
                json!({"notebook_path": "n.ipynb"}),
                "tool:file:notebook_edit /home/u/proj/n.ipynb",
            ),
            (
                "Read",
                json!({"file_path": "./Cargo.toml"}),
                "tool:Read:/home/u/proj/Cargo.toml",
            ),
            (
                "Glob",
                json!({"pattern": "**/*.rs", "path": "../other"}),
                "tool:Glob:/home/u/other/**/*.rs",
            ),
            (
                "Glob",
                json!({"pattern": "../../srv/*/app.env"}),
                "tool:Glob:/home/srv/*/app.env",
            ),
            (
                "Write",
                json!({"file_path": "/etc/hosts"}),
                "tool:file:write /etc/hosts",
            ),
            // `~` is the home directory to Claude Code, not a name under cwd.
            (
                "Read",
                json!({"file_path": "~/.ssh/id_ed25519"}),
                "tool:Read:~/.ssh/id_ed25519",
            ),
        ];
        for (tool, input, want) in cases {
            assert_eq!(
                pre(tool, input.clone(), cwd).action_strings(),
                [want],
                "{input}"
            );
        }
        // Without an absolute working directory the path stays relative.
        for cwd in [None, Some("proj")] {
            assert_eq!(
                pre("Write", json!({"file_path": "../x"}), cwd).action_strings(),
                ["tool:file:write ../x"]
            );
        }
        // A PostToolUse report names the same file, or the run would look
        // undecided.
        let post = json!({"hook_event_name": "PostToolUse", "cwd": "/home/u/proj",
            "tool_name": "Write", "tool_input": {"file_path": "a.txt"}});
        assert_eq!(
            run_reports(&post).unwrap()[0]["detail"],
            "write /home/u/proj/a.txt"
        );
    }

    #[test]
    fn where_a_grep_searches_is_named_in_the_reason() {
        let p = pre(
            "Grep",
            json!({"pattern": "BEGIN OPENSSH", "path": "../../.ssh"}),
            Some("/home/u/proj"),
        );
        assert_eq!(p.action_strings(), ["tool:Grep:BEGIN OPENSSH"]);
        assert_eq!(
            p.origin.reason(),
            "Claude Code in /home/u/proj, this call in \"/home/.ssh\" (session s1)"
        );
        let here = pre("Grep", json!({"pattern": "x"}), Some("/home/u/proj"));
        assert_eq!(
            here.origin.reason(),
            "Claude Code in /home/u/proj (session s1)"
        );
    }
}
