//! opencode (checked against `@opencode-ai/plugin` 1.18.33): opencode has
//! no command hooks, only JS plugins. Its `permission.ask` plugin hook is
//! typed but never called in 1.18 (opencode issues #7006, #46809), so the
//! plugin actiongate ships (`actiongate-plugin.js`, written by `actiongate
//! setup opencode`) gates every call in `tool.execute.before`, which may
//! throw to block it, by running `actiongate hook opencode` with
//! `{"tool", "sessionID", "callID", "args", "directory"}` on stdin. Output
//! (exit 0): `{"status": "allow"|"deny", "reason"}`; the plugin throws
//! unless the status is `allow`. opencode cannot ask from this hook, so an
//! unanswered question is denied.

use serde_json::{Value, json};

use super::dialects::read_otherwise_by_dash;
use super::gate::{Answer, Origin, Verdict};
use super::map::{self, Call, all_fields, field, file_calls, read_calls};
use super::{Parsed, Reply, Runtime, text};
use crate::output::one_line;

/// The plugin `actiongate setup opencode` installs.
pub const PLUGIN: &str = include_str!("opencode-plugin.js");

/// The opencode contract (between the plugin and this hook).
pub struct Opencode;

/// Maps an opencode tool call (its built-in tool names; a file call
/// naming several paths is one call per path).
pub fn calls_of(name: &str, args: &Value) -> Result<Vec<Call>, String> {
    const PATHS: &[&str] = &["filePath", "path"];
    Ok(match name {
        "bash" => vec![Call::Shell(field(args, name, "command")?.to_owned())],
        "edit" | "multiedit" => file_calls(map::edit_verb(args, "oldString"), args, name, PATHS)?,
        "write" => file_calls("write", args, name, PATHS)?,
        "read" => read_calls(args, name, PATHS)?,
        "glob" => vec![map::glob(field(args, name, "pattern")?, text(args, "path"))],
        "grep" => vec![Call::Grep(field(args, name, "pattern")?.to_owned())],
        "webfetch" => vec![Call::Fetch(field(args, name, "url")?.to_owned())],
        // Search results are text strangers wrote, as a fetched page is.
        "websearch" | "codesearch" => vec![Call::Search(field(args, name, "query")?.to_owned())],
        // opencode runs each of a batch's calls itself, without the
        // plugin's hook: each is asked here as if called alone (a fetch in
        // it taints, a file in it is checked), and a batch inside a batch,
        // which opencode refuses, is refused.
        "batch" => {
            let list = args
                .get("tool_calls")
                .and_then(Value::as_array)
                .ok_or("the batch call has no tool_calls list")?;
            let mut calls = Vec::new();
            for call in list {
                let tool = call
                    .get("tool")
                    .and_then(Value::as_str)
                    .ok_or("a call of the batch names no tool")?;
                if tool == "batch" {
                    return Err("a batch inside a batch".to_owned());
                }
                let params = call.get("parameters").cloned().unwrap_or(Value::Null);
                let params = if params.is_null() {
                    serde_json::json!({})
                } else {
                    params
                };
                calls.extend(calls_of(tool, &params)?);
            }
            if calls.is_empty() {
                return Err("the batch names no call".to_owned());
            }
            calls
        }
        "patch" | "apply_patch" => {
            let mut calls = Vec::new();
            for patch in all_fields(args, name, &["patchText", "patch", "input"])? {
                calls.extend(map::patch_files(patch)?);
            }
            calls
        }
        other => vec![mcp_tool(other, args).unwrap_or_else(|| Call::Other {
            name: other.to_owned(),
            input: args.clone(),
        })],
    })
}

/// opencode's built-in tools that the mapping above does not name.
const BUILT_IN: &[&str] = &[
    "list",
    "task",
    "todowrite",
    "todoread",
    "question",
    "skill",
    "lsp",
    "batch",
    "invalid",
    "plan_enter",
    "plan_exit",
];

/// An MCP server's tool: opencode names it `<server>_<tool>`, each with
/// what is not `A-Z a-z 0-9 _ -` replaced by `_`, so any other tool whose
/// name holds a `_` is taken for one, split at the first `_` (a server
/// named with a `_` is split inside its name, and its rules are written
/// that way). It then taints the session as MCP results do, and a sending
/// verb in its name is guarded: a plugin's own tool taken for one only
/// costs questions.
fn mcp_tool(name: &str, args: &Value) -> Option<Call> {
    if BUILT_IN.contains(&name) {
        return None;
    }
    let (server, tool) = name.split_once('_')?;
    if server.is_empty() || tool.is_empty() {
        return None;
    }
    Some(Call::Mcp {
        server: server.to_owned(),
        tool: tool.to_owned(),
        input: args.clone(),
    })
}

impl Runtime for Opencode {
    fn parse(&self, hook: &Value) -> Result<Parsed, String> {
        let name = text(hook, "tool").ok_or("the hook input has no tool")?;
        let args = hook.get("args").cloned().unwrap_or(json!({}));
        // opencode runs a line in `$SHELL` (bash or zsh, or sh), which
        // the hook cannot see.
        let unsure = match name {
            "bash" => text(&args, "command").and_then(read_otherwise_by_dash).map(|c| {
                format!(
                    "opencode runs this line in the user's $SHELL, which may be sh (dash), reading `{}` otherwise than bash",
                    one_line(&c)
                )
            }),
            _ => None,
        };
        Ok(Parsed {
            event: "tool.execute.before".to_owned(),
            origin: Origin {
                runtime: "opencode",
                after_pre_tool: false,
                unsure,
                label: "opencode",
                session: text(hook, "sessionID").map(str::to_owned),
                call_id: text(hook, "callID").map(str::to_owned),
                cwd: text(hook, "directory").map(str::to_owned),
                // bash's `workdir`: where the command runs; where a grep
                // searches.
                dir: map::call_dir(text(hook, "directory"), text(&args, "workdir")).or_else(|| {
                    map::grep_dir(name == "grep", text(hook, "directory"), &args, &["path"])
                }),
            },
            // opencode resolves relative paths, a patch's too, against
            // its project directory.
            calls: map::in_dir(calls_of(name, &args)?, text(hook, "directory")),
            rule: None,
            input: Some(args),
        })
    }

    fn reply(&self, _: Option<&Parsed>, a: &Answer) -> Reply {
        let status = if a.verdict == Verdict::Allow {
            "allow"
        } else {
            "deny"
        };
        Reply::json(&json!({"status": status, "reason": a.reason}))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn call(tool: &str, args: Value) -> Parsed {
        Opencode
            .parse(&json!({"tool": tool, "sessionID": "s1", "callID": "c1",
                "args": args, "directory": "/home/u/proj"}))
            .unwrap()
    }

    /// opencode runs `bash` lines in `$SHELL`, which may be dash: a line
    /// the two read differently is left to a human.
    #[test]
    fn a_line_dash_reads_otherwise_is_unsure() {
        let unsure = |command: &str| call("bash", json!({"command": command})).origin.unsure;
        let u = unsure(r"echo $'\' ; touch x #'").unwrap();
        assert!(u.contains("$SHELL") && u.contains("`$'`"), "{u}");
        assert!(unsure("ls &> out").is_some());
        assert_eq!(unsure("ls -la"), None);
        assert_eq!(unsure(r#"echo "done!""#), None);
    }

    /// opencode resolves relative paths, a patch's too, against its
    /// project directory.
    #[test]
    fn relative_paths_are_joined_with_the_directory() {
        let cases = [
            (
                "write",
                json!({"filePath": "../../../srv/prod/app.env", "content": "x"}),
                vec!["tool:file:write /srv/prod/app.env"],
            ),
            (
                "read",
                json!({"filePath": "src/a.ts"}),
                vec!["tool:Read:/home/u/proj/src/a.ts"],
            ),
            (
                "glob",
                json!({"pattern": "**/*.ts", "path": "src"}),
                vec!["tool:Glob:/home/u/proj/src/**/*.ts"],
            ),
            (
                "apply_patch",
                json!({"patchText": "*** Begin Patch\n*** Delete File: ../../../srv/prod/db\n*** End Patch"}),
                vec!["tool:file:delete /srv/prod/db"],
            ),
        ];
        for (tool, args, want) in cases {
            assert_eq!(call(tool, args).action_strings(), want, "{tool}");
        }
    }

    /// Web and code search results taint the session; an MCP server's
    /// tool (`<server>_<tool>`) is asked as the MCP proxy and the other
    /// runtimes spell it, so the presets' taint and guard rules see it.
    /// opencode runs a batch's calls without its plugin's hook: each is
    /// asked here as if it came alone, so a fetch in a batch taints and a
    /// file in it is checked.
    #[test]
    fn a_batch_is_asked_call_by_call() {
        let batch = json!({"tool_calls": [
            {"tool": "webfetch", "parameters": {"url": "https://example.test/x", "format": "text"}},
            {"tool": "write", "parameters": {"filePath": "../../srv/prod/app.env", "content": "x"}}
        ]});
        assert_eq!(
            call("batch", batch).action_strings(),
            [
                "tool:WebFetch:https://example.test/x",
                "tool:file:write /home/srv/prod/app.env"
            ]
        );
        for bad in [
            json!({}),
            json!({"tool_calls": []}),
            json!({"tool_calls": [{"parameters": {}}]}),
            json!({"tool_calls": [{"tool": "batch", "parameters": {"tool_calls": []}}]}),
        ] {
            assert!(
                Opencode
                    .parse(&json!({"tool": "batch", "args": bad, "directory": "/p"}))
                    .is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn searches_and_mcp_tools_map_as_the_other_runtimes_do() {
        let cases = [
            (
                "websearch",
                json!({"query": "install foo", "numResults": 5}),
                "tool:WebSearch:install foo",
            ),
            (
                "codesearch",
                json!({"query": "tokio select"}),
                "tool:WebSearch:tokio select",
            ),
            (
                "github_create_issue",
                json!({"title": "t"}),
                r#"tool:mcp__github__create_issue:{"title":"t"}"#,
            ),
            (
                "my_mail_send_mail",
                json!({}),
                "tool:mcp__my__mail_send_mail:{}",
            ),
            ("todowrite", json!({}), "tool:todowrite:{}"),
            ("plan_exit", json!({}), "tool:plan_exit:{}"),
            ("_x", json!({}), "tool:_x:{}"),
            ("read_", json!({}), "tool:read_:{}"),
        ];
        for (tool, args, want) in cases {
            assert_eq!(call(tool, args).action_strings(), [want], "{tool}");
        }
        assert!(
            Opencode
                .parse(&json!({"tool": "websearch", "args": {}}))
                .is_err()
        );
    }

    #[test]
    fn a_bash_workdir_is_named_in_the_reason_not_the_action() {
        let p = call(
            "bash",
            json!({"command": "rm -rf build", "workdir": "/srv/prod"}),
        );
        assert_eq!(p.action_strings(), ["tool:bash:rm -rf build"]);
        assert_eq!(
            p.origin.reason(),
            "opencode in /home/u/proj, this call in \"/srv/prod\" (session s1)"
        );
    }

    #[test]
    fn where_a_grep_searches_is_named_in_the_reason() {
        let p = call("grep", json!({"pattern": "token", "path": "../../../etc"}));
        assert_eq!(p.action_strings(), ["tool:Grep:token"]);
        assert_eq!(
            p.origin.reason(),
            "opencode in /home/u/proj, this call in \"/etc\" (session s1)"
        );
    }
}
