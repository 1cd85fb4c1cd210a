//! Codex CLI (checked against `@openai/codex` 0.169.0, whose binary embeds
//! the hook JSON schemas): the `PreToolUse` and `PermissionRequest` command
//! hooks in `hooks.json`. Input on stdin: `session_id`, `cwd`,
//! `hook_event_name`, `tool_name` (`Bash`, `apply_patch`,
//! `mcp__<server>__<tool>`), `tool_input` (`command`: the command line or
//! the patch), `tool_use_id` (PreToolUse). Codex 0.169 rejects
//! `permissionDecision` `allow` and `ask` in PreToolUse, so:
//!
//! - `PreToolUse`: allowed, nothing on stdout (exit 0); otherwise
//!   `hookSpecificOutput.permissionDecision` `deny` with a non-empty
//!   `permissionDecisionReason`. There is no "ask": an unanswered
//!   question is denied.
//! - `PermissionRequest` (Codex is about to ask its user, for a call its
//!   `PreToolUse` passed, to run outside the sandbox): its input has no
//!   `tool_use_id`, so an operator's approval of the same call (tool,
//!   detail, session) made in the last 10 minutes answers it; else it is
//!   asked as a new action with a caution (what a rule or grant allowed
//!   inside the sandbox is not allowed outside by it).
//!   `hookSpecificOutput.decision.behavior` `allow`, or `deny` with
//!   `message`; with the timeout fallback `ask`, nothing, and Codex asks.

use serde_json::{Value, json};

use super::dialects::read_otherwise_by_dash;
use super::gate::{Answer, Origin, Verdict};
use super::map::{self, Call, field};
use super::{Parsed, Reply, Runtime, event_of, text};
use crate::output::one_line;

/// The Codex contract.
pub struct Codex;

/// Maps a Codex tool call.
pub fn calls_of(name: &str, input: &Value) -> Result<Vec<Call>, String> {
    Ok(match name {
        "Bash" => vec![Call::Shell(field(input, name, "command")?.to_owned())],
        "apply_patch" => map::patch_files(field(input, name, "command")?)?,
        // Codex's MCP resource tools: text the server wrote.
        "read_mcp_resource" => vec![map::mcp_resource(
            Some(field(input, name, "server")?),
            Some(field(input, name, "uri")?),
        )],
        "list_mcp_resources" | "list_mcp_resource_templates" => {
            vec![map::mcp_resource(text(input, "server"), None)]
        }
        other => vec![
            map::mcp_double_underscore(other, input).unwrap_or_else(|| Call::Other {
                name: other.to_owned(),
                input: input.clone(),
            }),
        ],
    })
}

impl Runtime for Codex {
    fn parse(&self, hook: &Value) -> Result<Parsed, String> {
        let event = event_of(
            hook,
            "hook_event_name",
            &["PreToolUse", "PermissionRequest"],
        )?;
        let name = text(hook, "tool_name").ok_or("the hook input has no tool_name")?;
        let input = hook.get("tool_input").cloned().unwrap_or(json!({}));
        let cwd = text(hook, "cwd");
        // A patch applies under the call's own working directory, where
        // Codex names one, else under the session's.
        let dir = map::call_dir(cwd, text(&input, "workdir"));
        let after_pre_tool = event == "PermissionRequest";
        let dash = match name {
            "Bash" => text(&input, "command").and_then(read_otherwise_by_dash).map(|c| {
                format!(
                    "Codex may run this line in sh (dash), which reads `{}` otherwise than bash",
                    one_line(&c)
                )
            }),
            _ => None,
        };
        // Leaving the sandbox is a question of its own: what a rule let
        // run inside it is not thereby let run outside.
        let outside = after_pre_tool.then(|| "Codex asks to run it outside its sandbox".to_owned());
        let unsure = match (dash, outside) {
            (Some(d), Some(o)) => Some(format!("{o}; {d}")),
            (d, o) => d.or(o),
        };
        Ok(Parsed {
            event,
            origin: Origin {
                runtime: "codex",
                label: "Codex",
                session: text(hook, "session_id").map(str::to_owned),
                call_id: text(hook, "tool_use_id").map(str::to_owned),
                cwd: cwd.map(str::to_owned),
                dir: dir.clone(),
                // Asked before Codex runs a call its PreToolUse passed
                // outside the sandbox: answered by that call's action.
                after_pre_tool,
                unsure,
            },
            calls: map::in_dir(calls_of(name, &input)?, dir.as_deref().or(cwd)),
            rule: None,
            input: Some(input),
        })
    }

    fn reply(&self, parsed: Option<&Parsed>, a: &Answer) -> Reply {
        if parsed.is_some_and(|p| p.event == "PermissionRequest") {
            let decision = match a.verdict {
                Verdict::Allow => json!({"behavior": "allow"}),
                Verdict::Deny => json!({"behavior": "deny", "message": a.reason}),
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
        if a.verdict == Verdict::Allow {
            return Reply {
                stdout: None,
                stderr: None,
                code: 0,
            };
        }
        Reply::json(&json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": a.reason,
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pre(tool: &str, input: Value) -> Parsed {
        Codex
            .parse(&json!({"hook_event_name": "PreToolUse", "session_id": "s1",
                "cwd": "/home/u/proj", "tool_name": tool, "tool_input": input,
                "tool_use_id": "c1"}))
            .unwrap()
    }

    /// Codex applies a patch's paths under the call's working directory:
    /// its `workdir` when it names one, else the session's `cwd`.
    #[test]
    fn patch_paths_are_joined_with_the_calls_working_directory() {
        let patch = "*** Begin Patch\n*** Add File: ../../../srv/prod/app.env\n+x\n*** Update File: src/a.rs\n@@\n-a\n+b\n*** Delete File: /tmp/x\n*** End Patch\n";
        assert_eq!(
            pre("apply_patch", json!({"command": patch})).action_strings(),
            [
                "tool:file:write /srv/prod/app.env",
                "tool:file:edit /home/u/proj/src/a.rs",
                "tool:file:delete /tmp/x"
            ]
        );
        let got = pre("apply_patch", json!({"command": patch, "workdir": "sub"})).action_strings();
        assert_eq!(got[1], "tool:file:edit /home/u/proj/sub/src/a.rs");
        let got = pre("apply_patch", json!({"command": patch, "workdir": "/w"})).action_strings();
        assert_eq!(got[1], "tool:file:edit /w/src/a.rs");
    }

    /// Where a command runs is for the human to see, not part of the
    /// command: the action stays `tool:bash:<command>`.
    #[test]
    fn a_shell_workdir_is_named_in_the_reason_not_the_action() {
        let p = pre(
            "Bash",
            json!({"command": "rm -rf build", "workdir": "../other"}),
        );
        assert_eq!(p.action_strings(), ["tool:bash:rm -rf build"]);
        assert_eq!(
            p.origin.reason(),
            "Codex in /home/u/proj, this call in \"/home/u/other\" (session s1)"
        );
        let p = pre("Bash", json!({"command": "ls", "workdir": null}));
        assert_eq!(p.origin.reason(), "Codex in /home/u/proj (session s1)");
        let p = pre("Bash", json!({"command": "ls", "workdir": "."}));
        assert_eq!(p.origin.reason(), "Codex in /home/u/proj (session s1)");
    }
}
