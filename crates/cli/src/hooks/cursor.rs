//! Cursor (`.cursor/hooks.json`, version 1; checked against Cursor's hook
//! documentation and the community `cursor-hooks` types and schema, as
//! noted in docs/hooks.md). Input on stdin: `hook_event_name`,
//! `conversation_id`, `generation_id`, `workspace_roots`, and per event:
//! `beforeShellExecution` `command`, `cwd`; `beforeMCPExecution`
//! `tool_name`, `tool_input`, `url` or `command`; `beforeReadFile`
//! `file_path`; `preToolUse` `tool_name`, `tool_input`, `tool_use_id`.
//! Output (exit 0): `{"permission": "allow"|"deny"|"ask", "user_message",
//! "agent_message"}`; `beforeReadFile` knows only allow and deny, so ask
//! is deny there.

use serde_json::{Value, json};

use super::dialects::{History, expands_history, read_otherwise_by_dash};
use super::gate::{Answer, Origin, Verdict};
use super::map::{self, Call, any_field, field, file_calls, read_calls};
use super::{Parsed, Reply, Runtime, event_of, text};
use crate::output::one_line;

/// The Cursor contract.
pub struct Cursor;

const EVENTS: &[&str] = &[
    "beforeShellExecution",
    "beforeMCPExecution",
    "beforeReadFile",
    "preToolUse",
];

/// An MCP call of server `unknown`: Cursor's hook input does not name the
/// server (`beforeMCPExecution` has its `url` or `command`), and the tool
/// name is the server's own, so nothing in it may choose another server.
/// `tool` is that name (`beforeMCPExecution`), or what follows `MCP:` in
/// `preToolUse`'s `MCP:<tool>`.
fn mcp_call(tool: &str, input: &Value) -> Call {
    // Cursor sends the input as an object or as a JSON string.
    let input = match input {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| input.clone()),
        other => other.clone(),
    };
    Call::Mcp {
        server: "unknown".to_owned(),
        tool: tool.to_owned(),
        input,
    }
}

/// Maps a `preToolUse` call (a file call naming several paths is one
/// call per path).
fn tool_calls(name: &str, input: &Value) -> Result<Vec<Call>, String> {
    const PATHS: &[&str] = &["file_path", "path", "target_file"];
    Ok(match name {
        "Shell" | "Bash" | "run_terminal_cmd" => {
            vec![Call::Shell(field(input, name, "command")?.to_owned())]
        }
        "Edit" | "StrReplace" | "MultiEdit" | "search_replace" | "edit_file" => {
            file_calls("edit", input, name, PATHS)?
        }
        "Write" | "write" => file_calls("write", input, name, PATHS)?,
        "Delete" | "delete_file" => file_calls("delete", input, name, PATHS)?,
        "Read" | "read_file" => read_calls(input, name, PATHS)?,
        "Grep" | "grep" => vec![Call::Grep(field(input, name, "pattern")?.to_owned())],
        // Text typed into a shell the agent started: read as the command
        // line it may be (a line a program reads instead is asked too).
        "WriteShellStdin" | "write_shell_stdin" => vec![Call::Shell(
            any_field(input, name, &["chars", "text", "input", "data"])?.to_owned(),
        )],
        "WebFetch" | "web_fetch" | "Fetch" | "fetch" => {
            vec![Call::Fetch(field(input, name, "url")?.to_owned())]
        }
        "ReadMcpResource" | "read_mcp_resource" => vec![map::mcp_resource(
            any_field(input, name, &["server", "serverName", "server_name"]).ok(),
            Some(any_field(input, name, &["uri", "url"])?),
        )],
        "ListMcpResources" | "list_mcp_resources" => vec![map::mcp_resource(
            any_field(input, name, &["server", "serverName", "server_name"]).ok(),
            None,
        )],
        "WebSearch" | "web_search" => vec![Call::Search(
            any_field(input, name, &["query", "search_term"])?.to_owned(),
        )],
        n if let Some(tool) = n.strip_prefix("MCP:") => vec![mcp_call(tool, input)],
        other => vec![Call::Other {
            name: other.to_owned(),
            input: input.clone(),
        }],
    })
}

/// Why a line Cursor's terminal runs may not be what the hook read:
/// that terminal is the user's own shell (bash, zsh or sh), interactive.
fn shell_unsure(line: &str) -> Option<String> {
    if let Some(c) = read_otherwise_by_dash(line) {
        return Some(format!(
            "Cursor runs this line in the user's shell, which may be sh (dash), reading `{}` otherwise than bash",
            one_line(&c)
        ));
    }
    expands_history(line, History::BashOrZsh).then(|| {
        "Cursor types this line into an interactive shell, which first expands the history references (`!`, `^`) in it".to_owned()
    })
}

impl Runtime for Cursor {
    fn parse(&self, hook: &Value) -> Result<Parsed, String> {
        if text(hook, "hook_event_name").is_none() {
            return Err("the hook input has no hook_event_name".to_owned());
        }
        let event = event_of(hook, "hook_event_name", EVENTS)?;
        let input = hook.get("tool_input").cloned().unwrap_or(json!({}));
        let calls = match event.as_str() {
            "beforeShellExecution" => {
                vec![Call::Shell(field(hook, &event, "command")?.to_owned())]
            }
            "beforeMCPExecution" => vec![mcp_call(field(hook, &event, "tool_name")?, &input)],
            "beforeReadFile" => vec![Call::Read(field(hook, &event, "file_path")?.to_owned())],
            _ => tool_calls(field(hook, &event, "tool_name")?, &input)?,
        };
        let roots = hook
            .get("workspace_roots")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        // Relative paths are Cursor's under `cwd`, or under the workspace
        // root when there is one; of several, which one is not known.
        let sole_root = match roots {
            [root] => root.as_str(),
            _ => None,
        };
        let base = text(hook, "cwd").or(sole_root);
        let unsure = calls.iter().find_map(|c| match c {
            Call::Shell(line) => shell_unsure(line),
            _ => None,
        });
        let first_root = roots.first().and_then(Value::as_str);
        let cwd = text(hook, "cwd").or(first_root).map(str::to_owned);
        Ok(Parsed {
            event,
            origin: Origin {
                runtime: "cursor",
                after_pre_tool: false,
                unsure,
                label: "Cursor",
                session: text(hook, "conversation_id").map(str::to_owned),
                // `generation_id` is shared by every call of a turn: only a
                // per-call id may make two requests one action.
                call_id: text(hook, "tool_use_id").map(str::to_owned),
                cwd,
                // A shell tool's own `working_directory`; where a grep
                // searches.
                dir: map::call_dir(base, text(&input, "working_directory")).or_else(|| {
                    let grep = matches!(text(hook, "tool_name"), Some("Grep" | "grep"));
                    map::grep_dir(grep, base, &input, &["path"])
                }),
            },
            calls: map::in_dir(calls, base),
            rule: None,
            input: Some(input),
        })
    }

    fn reply(&self, parsed: Option<&Parsed>, a: &Answer) -> Reply {
        let read = parsed.is_some_and(|p| p.event == "beforeReadFile");
        let permission = match a.verdict {
            Verdict::Allow => "allow",
            Verdict::Ask if !read => "ask",
            _ => "deny",
        };
        Reply::json(&json!({
            "permission": permission,
            "user_message": a.reason,
            "agent_message": a.reason,
        }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(hook: Value) -> Parsed {
        Cursor.parse(&hook).unwrap()
    }

    /// Cursor's hook input names no MCP server: `beforeMCPExecution` has
    /// the server's own tool name, `preToolUse` `MCP:<tool>`. Whatever the
    /// name holds, the server stays unknown: a tool an upstream server
    /// names `MCP:github:merge_pr` or `github:merge_pr` is not asked as
    /// the `github` server's `merge_pr`, which a rule may allow.
    #[test]
    fn an_mcp_tool_name_cannot_name_another_server() {
        let before = |name: &str| {
            parse(
                json!({"hook_event_name": "beforeMCPExecution", "conversation_id": "c",
                "tool_name": name, "tool_input": "{\"n\":1}", "url": "https://mcp.example.test"}),
            )
            .action_strings()
        };
        let pre = |name: &str| {
            parse(
                json!({"hook_event_name": "preToolUse", "conversation_id": "c",
                "tool_name": name, "tool_use_id": "t1", "tool_input": {"n": 1}}),
            )
            .action_strings()
        };
        assert_eq!(before("query"), [r#"tool:mcp__unknown__query:{"n":1}"#]);
        assert_eq!(pre("MCP:query"), [r#"tool:mcp__unknown__query:{"n":1}"#]);
        for name in ["MCP:github:merge_pr", "github:merge_pr"] {
            for got in [before(name), pre(&format!("MCP:{name}"))] {
                let [one] = got.as_slice() else {
                    panic!("{got:?}")
                };
                assert!(!one.contains("mcp__github__"), "{one}");
                assert!(one.starts_with("tool:mcp:unknown__"), "{one}");
            }
        }
    }

    /// Relative paths are joined with `cwd`, or with the workspace root
    /// when there is exactly one; with several roots and no `cwd` which
    /// one Cursor means is not known, so the path stays relative.
    #[test]
    fn relative_paths_are_joined_with_the_working_directory() {
        let write = json!({"hook_event_name": "preToolUse", "conversation_id": "c",
            "workspace_roots": ["/home/u/proj"], "cwd": "/home/u/proj",
            "tool_name": "Write", "tool_use_id": "t1",
            "tool_input": {"file_path": "../../../srv/prod/app.env", "contents": "x"}});
        assert_eq!(
            parse(write).action_strings(),
            ["tool:file:write /srv/prod/app.env"]
        );
        let read = |roots: Value| {
            parse(
                json!({"hook_event_name": "beforeReadFile", "conversation_id": "c",
                "workspace_roots": roots, "file_path": "src/a.ts"}),
            )
            .action_strings()
        };
        assert_eq!(
            read(json!(["/home/u/proj"])),
            ["tool:Read:/home/u/proj/src/a.ts"]
        );
        assert_eq!(read(json!(["/a", "/b"])), ["tool:Read:src/a.ts"]);
    }

    /// The web tools `setup` now hooks are asked as every runtime's are,
    /// so `readonly` (which allows no fetch) asks a human about them.
    #[test]
    fn web_tools_are_asked_as_fetches_and_searches() {
        let call = |name: &str, input: Value| {
            parse(
                json!({"hook_event_name": "preToolUse", "conversation_id": "c",
                "tool_name": name, "tool_use_id": "t1", "tool_input": input}),
            )
            .action_strings()
        };
        assert_eq!(
            call("WebFetch", json!({"url": "https://example.test/?k=AKIA"})),
            ["tool:WebFetch:https://example.test/?k=AKIA"]
        );
        assert_eq!(
            call("WebSearch", json!({"search_term": "x"})),
            ["tool:WebSearch:x"]
        );
        assert_eq!(
            call("Task", json!({"prompt": "p"})),
            [r#"tool:Task:{"prompt":"p"}"#]
        );
        let matcher = crate::setup::config::CURSOR_TOOLS;
        for tool in ["WebFetch", "WebSearch", "Task", "Write", "Delete"] {
            assert!(matcher.split('|').any(|t| t == tool), "{tool}");
        }
    }

    /// The other tools of Cursor's agent that change or fetch: text typed
    /// into a shell it started is asked as a command line, `Fetch` as a
    /// fetch, MCP resources as the MCP proxy asks them, a diff it applies
    /// with its input; a typed call naming no text cannot be mapped.
    #[test]
    fn typing_into_a_shell_fetching_and_applying_diffs_are_asked() {
        let hook = |name: &str, input: Value| {
            Cursor.parse(
                &json!({"hook_event_name": "preToolUse", "conversation_id": "c",
                "tool_name": name, "tool_use_id": "t1", "tool_input": input}),
            )
        };
        let call = |name: &str, input: Value| hook(name, input).unwrap().action_strings();
        assert_eq!(
            call(
                "WriteShellStdin",
                json!({"shell_id": "1", "chars": "rm -rf /srv/data"})
            ),
            ["tool:bash:rm -rf /srv/data"]
        );
        assert!(hook("WriteShellStdin", json!({"shell_id": "1"})).is_err());
        assert_eq!(
            call("Fetch", json!({"url": "https://example.test/a"})),
            ["tool:WebFetch:https://example.test/a"]
        );
        assert_eq!(
            call(
                "ReadMcpResource",
                json!({"server": "docs", "uri": "file:///notes"})
            ),
            ["tool:mcp-resource:docs file:///notes"]
        );
        assert_eq!(
            call("ListMcpResources", json!({"server": "docs"})),
            ["tool:mcp-resource:docs *"]
        );
        assert_eq!(
            call("ApplyAgentDiff", json!({"diff": "x"})),
            [r#"tool:ApplyAgentDiff:{"diff":"x"}"#]
        );
        let matcher = crate::setup::config::CURSOR_TOOLS;
        for tool in [
            "WriteShellStdin",
            "Fetch",
            "ApplyAgentDiff",
            "ReadMcpResource",
            "ListMcpResources",
        ] {
            assert!(matcher.split('|').any(|t| t == tool), "{tool}");
        }
    }

    /// Cursor's terminal is the user's interactive shell: a line dash
    /// reads otherwise than bash, or one whose history references bash or
    /// zsh would expand first, is left to a human, from either event.
    #[test]
    fn a_line_another_shell_reads_otherwise_is_unsure() {
        let shell = |command: &str| {
            [
                parse(json!({"hook_event_name": "beforeShellExecution",
                    "conversation_id": "c", "command": command, "cwd": "/p"})),
                parse(
                    json!({"hook_event_name": "preToolUse", "conversation_id": "c",
                    "tool_name": "Shell", "tool_use_id": "t1",
                    "tool_input": {"command": command}}),
                ),
            ]
            .map(|p| p.origin.unsure)
        };
        for line in [
            r"echo $'\' ; touch x #'",
            "echo {a,b}",
            r#"echo "done!""#,
            "!!",
        ] {
            for unsure in shell(line) {
                assert!(unsure.is_some(), "{line}");
            }
        }
        for line in ["ls -la", "test ! -f x", "cargo test -- --nocapture"] {
            assert_eq!(shell(line), [None, None], "{line}");
        }
    }

    #[test]
    fn a_shell_working_directory_is_named_in_the_reason_not_the_action() {
        let p = parse(
            json!({"hook_event_name": "preToolUse", "conversation_id": "c",
            "workspace_roots": ["/home/u/proj"], "cwd": "/home/u/proj",
            "tool_name": "Shell", "tool_use_id": "t1",
            "tool_input": {"command": "rm -rf build", "working_directory": "/srv/prod"}}),
        );
        assert_eq!(p.action_strings(), ["tool:bash:rm -rf build"]);
        assert_eq!(
            p.origin.reason(),
            "Cursor in /home/u/proj, this call in \"/srv/prod\" (session c)"
        );
    }

    #[test]
    fn where_a_grep_searches_is_named_in_the_reason() {
        let p = parse(
            json!({"hook_event_name": "preToolUse", "conversation_id": "c",
            "workspace_roots": ["/home/u/proj"], "cwd": "/home/u/proj",
            "tool_name": "Grep", "tool_use_id": "t2",
            "tool_input": {"pattern": "token", "path": "/srv/prod"}}),
        );
        assert_eq!(p.action_strings(), ["tool:Grep:token"]);
        assert_eq!(
            p.origin.reason(),
            "Cursor in /home/u/proj, this call in \"/srv/prod\" (session c)"
        );
    }
}
