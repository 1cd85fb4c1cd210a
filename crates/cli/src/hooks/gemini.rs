//! Gemini CLI (checked against `@google/gemini-cli` 0.61.0): the
//! `BeforeTool` command hook in `settings.json`. Input on stdin:
//! `session_id`, `cwd`, `hook_event_name`, `tool_name`, `tool_input`, and
//! `mcp_context` (`server_name`, `tool_name`) for MCP tools. Output: allow
//! and ask as JSON on stdout, exit 0 (`{"decision": "allow"|"ask",
//! "reason"}`); deny as exit code 2 with the reason on stderr, Gemini
//! CLI's blocking path. A hook that fails any other way or times out
//! (60 s by default) lets the tool run, so the hook always answers
//! within its own budget.

use serde_json::{Value, json};

use super::gate::{Answer, Origin, Verdict};
use super::map::{self, Call, field};
use super::{Parsed, Reply, Runtime, event_of, text};

/// The Gemini CLI contract.
pub struct Gemini;

/// Maps a Gemini CLI tool call (its built-in tool names).
pub fn call_of(name: &str, input: &Value, hook: &Value) -> Result<Call, String> {
    if let Some(mcp) = hook.get("mcp_context") {
        return Ok(Call::Mcp {
            server: field(mcp, "MCP", "server_name")?.to_owned(),
            tool: field(mcp, "MCP", "tool_name")?.to_owned(),
            input: input.clone(),
        });
    }
    let path = || field(input, name, "file_path").map(str::to_owned);
    Ok(match name {
        "run_shell_command" => Call::Shell(field(input, name, "command")?.to_owned()),
        "write_file" => Call::File {
            verb: "write",
            path: path()?,
        },
        "replace" => Call::File {
            verb: "edit",
            path: path()?,
        },
        "read_file" => Call::Read(path()?),
        "glob" => map::glob(field(input, name, "pattern")?, text(input, "dir_path")),
        // Lists one directory's entries: what a glob of `*` there lists.
        "list_directory" => map::glob("*", Some(field(input, name, "dir_path")?)),
        "grep_search" => Call::Grep(field(input, name, "pattern")?.to_owned()),
        "web_fetch" => Call::Fetch(field(input, name, "prompt")?.to_owned()),
        "google_web_search" => Call::Search(field(input, name, "query")?.to_owned()),
        other => Call::Other {
            name: other.to_owned(),
            input: input.clone(),
        },
    })
}

impl Runtime for Gemini {
    fn parse(&self, hook: &Value) -> Result<Parsed, String> {
        let event = event_of(hook, "hook_event_name", &["BeforeTool"])?;
        let name = text(hook, "tool_name").ok_or("the hook input has no tool_name")?;
        let input = hook.get("tool_input").cloned().unwrap_or(json!({}));
        let cwd = text(hook, "cwd");
        // A shell command's `dir_path` is where it runs (a glob's is in its
        // action already).
        let dir = match name {
            "run_shell_command" => map::call_dir(cwd, text(&input, "dir_path")),
            // Where a grep searches.
            _ => map::grep_dir(name == "grep_search", cwd, &input, &["dir_path", "path"]),
        };
        Ok(Parsed {
            event,
            origin: Origin {
                runtime: "gemini",
                after_pre_tool: false,
                label: "Gemini CLI",
                session: text(hook, "session_id").map(str::to_owned),
                // No per-call id in BeforeTool: each call is its own action.
                call_id: None,
                cwd: cwd.map(str::to_owned),
                dir,
            },
            // Gemini CLI resolves relative paths against its cwd.
            calls: map::in_dir(vec![call_of(name, &input, hook)?], cwd),
            rule: None,
            input: Some(input),
        })
    }

    fn reply(&self, _: Option<&Parsed>, a: &Answer) -> Reply {
        match a.verdict {
            Verdict::Allow => Reply::json(&json!({"decision": "allow", "reason": a.reason})),
            Verdict::Ask => Reply::json(&json!({"decision": "ask", "reason": a.reason})),
            Verdict::Deny | Verdict::Defer => Reply {
                stdout: None,
                stderr: Some(a.reason.clone()),
                code: 2,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn before(tool: &str, input: Value) -> Parsed {
        Gemini
            .parse(&json!({"hook_event_name": "BeforeTool", "session_id": "s1",
                "cwd": "/home/u/proj", "tool_name": tool, "tool_input": input}))
            .unwrap()
    }

    /// Gemini CLI resolves a relative `file_path` and `dir_path` against
    /// its working directory.
    #[test]
    fn relative_paths_are_joined_with_the_working_directory() {
        let cases = [
            (
                "write_file",
                json!({"file_path": "../../../srv/prod/app.env", "content": "x"}),
                "tool:file:write /srv/prod/app.env",
            ),
            (
                "replace",
                json!({"file_path": "src/a.rs", "old_string": "a", "new_string": "b"}),
                "tool:file:edit /home/u/proj/src/a.rs",
            ),
            (
                "read_file",
                json!({"file_path": "README.md"}),
                "tool:Read:/home/u/proj/README.md",
            ),
            (
                "glob",
                json!({"pattern": "*.rs", "dir_path": "src"}),
                "tool:Glob:/home/u/proj/src/*.rs",
            ),
            (
                "list_directory",
                json!({"dir_path": "../other", "ignore": ["*.log"]}),
                "tool:Glob:/home/u/other/*",
            ),
        ];
        for (tool, input, want) in cases {
            assert_eq!(before(tool, input).action_strings(), [want], "{tool}");
        }
    }

    #[test]
    fn a_shell_dir_path_is_named_in_the_reason_not_the_action() {
        let p = before(
            "run_shell_command",
            json!({"command": "rm -rf build", "dir_path": "packages/web"}),
        );
        assert_eq!(p.action_strings(), ["tool:bash:rm -rf build"]);
        assert_eq!(
            p.origin.reason(),
            "Gemini CLI in /home/u/proj, this call in /home/u/proj/packages/web (session s1)"
        );
    }

    #[test]
    fn where_a_grep_searches_is_named_in_the_reason() {
        let p = before(
            "grep_search",
            json!({"pattern": "token", "dir_path": "/etc"}),
        );
        assert_eq!(p.action_strings(), ["tool:Grep:token"]);
        assert_eq!(
            p.origin.reason(),
            "Gemini CLI in /home/u/proj, this call in /etc (session s1)"
        );
    }
}
