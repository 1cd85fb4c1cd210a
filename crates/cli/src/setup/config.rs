//! Each runtime's config file and how actiongate's hook is merged into it:
//! earlier actiongate entries are replaced, every other entry (other
//! hooks, other settings) is kept as it was.

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use serde_json::{Map, Value, json};

use crate::hooks::opencode::PLUGIN;

/// The runtimes `setup` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Runtime {
    /// Claude Code.
    ClaudeCode,
    /// Cursor.
    Cursor,
    /// Gemini CLI.
    Gemini,
    /// Codex CLI.
    Codex,
    /// GitHub Copilot CLI.
    Copilot,
    /// opencode.
    Opencode,
}

impl Runtime {
    /// Every runtime, for `doctor`.
    pub const ALL: [Runtime; 6] = [
        Runtime::ClaudeCode,
        Runtime::Cursor,
        Runtime::Gemini,
        Runtime::Codex,
        Runtime::Copilot,
        Runtime::Opencode,
    ];

    /// The name used in `hook <name>` and as the default agent.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::ClaudeCode => "claude-code",
            Runtime::Cursor => "cursor",
            Runtime::Gemini => "gemini",
            Runtime::Codex => "codex",
            Runtime::Copilot => "copilot",
            Runtime::Opencode => "opencode",
        }
    }

    /// The config file, for the user (`home`) or the project (`dir`).
    pub fn config_path(self, user: bool, home: &Path, dir: &Path) -> Result<PathBuf, String> {
        let base = if user { home } else { dir };
        Ok(match self {
            Runtime::ClaudeCode => base.join(".claude/settings.json"),
            Runtime::Cursor => base.join(".cursor/hooks.json"),
            Runtime::Gemini => base.join(".gemini/settings.json"),
            Runtime::Codex => base.join(".codex/hooks.json"),
            Runtime::Copilot if user => {
                return Err(
                    "Copilot CLI reads hooks from the repository's .github/hooks/: use --project"
                        .to_owned(),
                );
            }
            Runtime::Copilot => dir.join(".github/hooks/actiongate.json"),
            Runtime::Opencode if user => home.join(".config/opencode/plugins/actiongate.js"),
            Runtime::Opencode => dir.join(".opencode/plugins/actiongate.js"),
        })
    }
}

/// How the hook is called.
#[derive(Debug, Clone)]
pub struct HookCall {
    /// The actiongate binary.
    pub exe: String,
    /// The daemon's URL.
    pub url: String,
    /// The agent key's file.
    pub key_file: String,
    /// Seconds the hook waits for a human.
    pub wait: u64,
    /// Also gate Cursor's file reads (`beforeReadFile`).
    pub guard_reads: bool,
}

impl HookCall {
    /// The shell command line of `hook <runtime>`. Claude Code, Gemini
    /// CLI and Codex run the call when a hook exits with anything but 0 or
    /// 2, and so would a hook that could not answer (its binary moved:
    /// 127; killed or crashed: 128 and more): `|| exit 2` makes every such
    /// exit a refusal. (Cursor's `failClosed` does the same for Cursor.)
    pub fn command(&self, rt: Runtime) -> String {
        use crate::wrap::sh_quote;
        let line = format!(
            "{} hook {} --url {} --key-file {} --wait {}",
            sh_quote(&self.exe),
            rt.name(),
            sh_quote(&self.url),
            sh_quote(&self.key_file),
            self.wait
        );
        match rt {
            Runtime::Cursor => line,
            _ => format!("{line} || exit 2"),
        }
    }

    /// The runtime's hook timeout, in seconds: the wait and a margin.
    fn timeout(&self) -> u64 {
        self.wait + 10
    }
}

/// Whether a command line is actiongate's hook for this runtime: the
/// `actiongate` binary (any path to it) running `hook <runtime>`, as
/// [`HookCall::command`] writes it. Another program's line that merely
/// mentions `hook claude-code` is not.
fn is_our_command(line: &str, rt: Runtime) -> bool {
    let Some(words) = shlex::split(line) else {
        return false;
    };
    let program = words
        .first()
        .and_then(|w| Path::new(w).file_name())
        .and_then(|n| n.to_str());
    // The binary as installed (`actiongate`), or copied under a name of
    // its own (`actiongate-x86_64-unknown-linux-gnu`).
    program.is_some_and(|p| p.starts_with("actiongate"))
        && words.get(1).map(String::as_str) == Some("hook")
        && words.get(2).map(String::as_str) == Some(rt.name())
}

/// The command lines of one hook object (`{"type": "command", "command":
/// …}`, Cursor's `{"command": …}`, Copilot's `{"bash": …}`).
fn command_lines(hook: &Value) -> impl Iterator<Item = &str> {
    ["command", "bash", "powershell"]
        .into_iter()
        .filter_map(|k| hook.get(k).and_then(Value::as_str))
}

/// Whether one hook object runs actiongate's hook.
fn is_our_hook(hook: &Value, rt: Runtime) -> bool {
    command_lines(hook).any(|line| is_our_command(line, rt))
}

/// Whether any command line anywhere in `v` is ours.
fn holds_ours(v: &Value, rt: Runtime) -> bool {
    let mut found = false;
    visit_strings(v, &mut |s| found |= is_our_command(s, rt));
    found
}

fn visit_strings(v: &Value, f: &mut dyn FnMut(&str)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(a) => a.iter().for_each(|x| visit_strings(x, f)),
        Value::Object(o) => o.values().for_each(|x| visit_strings(x, f)),
        _ => {}
    }
}

/// `entry` without actiongate's hooks: a matcher group
/// (`{"matcher", "hooks": […]}`) keeps its other hooks, and goes only
/// when ours were all it held; a hook object of ours goes.
fn without_ours(entry: Value, rt: Runtime) -> Option<Value> {
    match entry {
        Value::Object(mut group) if group.get("hooks").is_some_and(Value::is_array) => {
            let Some(Value::Array(hooks)) = group.remove("hooks") else {
                return Some(Value::Object(group));
            };
            let before = hooks.len();
            let kept: Vec<Value> = hooks.into_iter().filter(|h| !is_our_hook(h, rt)).collect();
            if kept.is_empty() && before > 0 {
                return None;
            }
            group.insert("hooks".to_owned(), Value::Array(kept));
            Some(Value::Object(group))
        }
        hook if is_our_hook(&hook, rt) => None,
        other => Some(other),
    }
}

/// Replaces earlier actiongate hooks of `event` with `entry`, keeping
/// every other hook (those sharing a matcher group with ours too) in
/// order. An `event` that is not a list is not ours to rewrite.
fn put_entry(
    hooks: &mut Map<String, Value>,
    event: &str,
    entry: Value,
    rt: Runtime,
) -> Result<(), String> {
    let list = hooks.entry(event.to_owned()).or_insert_with(|| json!([]));
    let Value::Array(items) = list else {
        return Err(format!(
            "its hooks.{event} is not a list; fix it first (setup changed nothing)"
        ));
    };
    let old = std::mem::take(items);
    items.extend(old.into_iter().filter_map(|e| without_ours(e, rt)));
    items.push(entry);
    Ok(())
}

/// The `hooks` object of a settings file, created if missing.
fn hooks_of(doc: &mut Value) -> Result<&mut Map<String, Value>, String> {
    let obj = doc
        .as_object_mut()
        .ok_or("the config file is not a JSON object")?;
    let hooks = obj.entry("hooks").or_insert_with(|| json!({}));
    hooks
        .as_object_mut()
        .ok_or_else(|| "its `hooks` is not a JSON object".to_owned())
}

/// The new text of the runtime's config file, given its current text.
pub fn merged(rt: Runtime, current: &str, call: &HookCall) -> Result<String, String> {
    if rt == Runtime::Opencode {
        let config = json!({"bin": call.exe, "args": ["--url", call.url, "--key-file", call.key_file], "wait": call.wait});
        return Ok(PLUGIN.replace(
            "const CONFIG = {\"bin\": \"actiongate\", \"args\": [], \"wait\": 55}; // actiongate:config",
            &format!("const CONFIG = {config}; // actiongate:config"),
        ));
    }
    let mut doc: Value = if current.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(current)
            .map_err(|e| format!("the config file is not JSON ({e}); fix it first"))?
    };
    let cmd = call.command(rt);
    let t = call.timeout();
    match rt {
        Runtime::ClaudeCode | Runtime::Codex => {
            let hooks = hooks_of(&mut doc)?;
            for event in ["PreToolUse", "PermissionRequest"] {
                let entry = json!({"matcher": "*", "hooks": [{"type": "command", "command": cmd, "timeout": t}]});
                put_entry(hooks, event, entry, rt)?;
            }
            // What ran is reported, so a run nobody decided is seen.
            if rt == Runtime::ClaudeCode {
                let entry = json!({"matcher": "*", "hooks": [{"type": "command", "command": cmd, "timeout": 15}]});
                put_entry(hooks, "PostToolUse", entry, rt)?;
            }
        }
        Runtime::Gemini => {
            let hooks = hooks_of(&mut doc)?;
            let entry = json!({"hooks": [{"type": "command", "name": "actiongate", "command": cmd, "timeout": t * 1000}]});
            put_entry(hooks, "BeforeTool", entry, rt)?;
        }
        Runtime::Cursor => {
            doc.as_object_mut()
                .ok_or("the config file is not a JSON object")?
                .entry("version")
                .or_insert(json!(1));
            let hooks = hooks_of(&mut doc)?;
            let entry = json!({"command": cmd, "failClosed": true});
            let mut events = vec!["beforeShellExecution", "beforeMCPExecution"];
            if call.guard_reads {
                events.push("beforeReadFile");
            }
            for event in events {
                put_entry(hooks, event, entry.clone(), rt)?;
            }
            // Every other tool Cursor's agent has: shell and MCP calls are
            // asked above already (and reads with --guard-reads).
            let mut edits = entry.clone();
            edits["matcher"] = json!(CURSOR_TOOLS);
            put_entry(hooks, "preToolUse", edits, rt)?;
        }
        Runtime::Copilot => {
            doc.as_object_mut()
                .ok_or("the config file is not a JSON object")?
                .entry("version")
                .or_insert(json!(1));
            let hooks = hooks_of(&mut doc)?;
            let entry = json!({"type": "command", "bash": cmd, "timeoutSec": t});
            put_entry(hooks, "preToolUse", entry, rt)?;
        }
        Runtime::Opencode => unreachable!("handled above"),
    }
    let mut text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    text.push('\n');
    Ok(text)
}

/// The tools of Cursor's agent `preToolUse` asks about: file changes (a
/// diff it applies included), text typed into a shell it started, the web
/// (a fetch can carry what was read out), MCP resources (a stranger's
/// text) and subagents. Shell commands and MCP tools have events of their
/// own; reads, searches and listings are not asked (reads with
/// `--guard-reads`).
pub const CURSOR_TOOLS: &str = "Write|Edit|StrReplace|MultiEdit|Delete|ApplyAgentDiff|WriteShellStdin|WebFetch|Fetch|WebSearch|ReadMcpResource|ListMcpResources|Task";

/// Whether the config text holds actiongate's hook for this runtime.
pub fn installed(rt: Runtime, text: &str) -> bool {
    if rt == Runtime::Opencode {
        return text.contains("actiongate:config");
    }
    serde_json::from_str::<Value>(text).is_ok_and(|doc| holds_ours(&doc, rt))
}

/// Whether every actiongate hook in the config text refuses when the hook
/// cannot answer: its command ends in `|| exit 2`
/// ([`HookCall::command`]), or, Cursor's, the hook has `"failClosed":
/// true`. opencode's plugin refuses on its own.
pub fn fails_closed(rt: Runtime, text: &str) -> bool {
    if rt == Runtime::Opencode {
        return true;
    }
    let Ok(doc) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    let mut all = true;
    visit_hooks(&doc, &mut |hook| {
        if !is_our_hook(hook, rt) {
            return;
        }
        all &= if rt == Runtime::Cursor {
            hook.get("failClosed") == Some(&Value::Bool(true))
        } else {
            command_lines(hook).all(|line| !is_our_command(line, rt) || refuses_on_failure(line))
        };
    });
    all
}

/// The tools of [`CURSOR_TOOLS`] that no actiongate `preToolUse` hook in
/// a Cursor config asks about (one an older `setup` wrote names fewer),
/// in that order; none for another runtime.
pub fn unasked_tools(rt: Runtime, text: &str) -> Vec<&'static str> {
    if rt != Runtime::Cursor {
        return Vec::new();
    }
    let doc: Value = serde_json::from_str(text).unwrap_or_default();
    let entries = doc["hooks"]["preToolUse"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let matched: Vec<String> = entries
        .iter()
        .filter(|e| is_our_hook(e, rt))
        .filter_map(|e| e.get("matcher").and_then(Value::as_str))
        .flat_map(|m| m.split('|').map(str::to_owned))
        .collect();
    CURSOR_TOOLS
        .split('|')
        .filter(|t| !matched.iter().any(|m| m == t))
        .collect()
}

/// Whether a hook command line ends in `|| exit 2` and holds no other
/// operator: `… || exit 0 || exit 2` runs the call when the hook is
/// missing or crashes.
fn refuses_on_failure(line: &str) -> bool {
    let Some(words) = shlex::split(line) else {
        return false;
    };
    let Some(head) = words.len().checked_sub(3) else {
        return false;
    };
    words[head..] == ["||", "exit", "2"]
        && !words[..head]
            .iter()
            .any(|w| matches!(w.as_str(), "||" | "&&" | "|" | "&" | ";") || w.ends_with(';'))
}

/// Calls `f` on every object in `v`.
fn visit_hooks(v: &Value, f: &mut dyn FnMut(&Value)) {
    match v {
        Value::Array(a) => a.iter().for_each(|x| visit_hooks(x, f)),
        Value::Object(o) => {
            f(v);
            o.values().for_each(|x| visit_hooks(x, f));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn call() -> HookCall {
        HookCall {
            exe: "/bin/actiongate".into(),
            url: "http://127.0.0.1:8080".into(),
            key_file: "/k".into(),
            wait: 110,
            guard_reads: false,
        }
    }

    #[test]
    fn merging_keeps_other_hooks_and_replaces_ours() {
        let current = r#"{"model": "x", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}]}}"#;
        let once = merged(Runtime::ClaudeCode, current, &call()).unwrap();
        let twice = merged(Runtime::ClaudeCode, &once, &call()).unwrap();
        assert_eq!(once, twice, "setup twice is setup once");
        let doc: Value = serde_json::from_str(&twice).unwrap();
        assert_eq!(doc["model"], "x");
        let pre = doc["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0]["hooks"][0]["command"], "lint");
        assert!(holds_ours(&pre[1], Runtime::ClaudeCode));
        assert!(installed(Runtime::ClaudeCode, &twice));
        assert!(!installed(Runtime::Codex, &twice));
        assert!(merged(Runtime::Gemini, "not json", &call()).is_err());
    }

    #[test]
    fn the_opencode_plugin_gets_its_settings() {
        let text = merged(Runtime::Opencode, "", &call()).unwrap();
        assert!(text.contains(r#""bin":"/bin/actiongate""#), "{text}");
        assert!(installed(Runtime::Opencode, &text));
    }

    #[test]
    fn an_installed_hook_refuses_on_a_crash_and_an_older_one_is_told() {
        for rt in [
            Runtime::ClaudeCode,
            Runtime::Codex,
            Runtime::Gemini,
            Runtime::Copilot,
        ] {
            let text = merged(rt, "", &call()).unwrap();
            assert!(fails_closed(rt, &text), "{rt:?}: {text}");
            let older = text.replace(" || exit 2", "");
            assert!(installed(rt, &older) && !fails_closed(rt, &older), "{rt:?}");
            let open = text.replace(" || exit 2", " || exit 0 || exit 2");
            assert!(installed(rt, &open) && !fails_closed(rt, &open), "{rt:?}");
            let copied = text.replace(
                "/bin/actiongate",
                "/opt/actiongate-x86_64-unknown-linux-gnu",
            );
            assert!(
                installed(rt, &copied) && fails_closed(rt, &copied),
                "{rt:?}"
            );
        }
        let cursor = merged(Runtime::Cursor, "", &call()).unwrap();
        assert!(!cursor.contains("|| exit 2") && fails_closed(Runtime::Cursor, &cursor));
        // A Cursor hook without `failClosed` runs the call when it crashes.
        let open = cursor.replace("\"failClosed\": true", "\"failClosed\": false");
        assert!(installed(Runtime::Cursor, &open) && !fails_closed(Runtime::Cursor, &open));
    }

    /// An older setup's Cursor `preToolUse` matcher asked about fewer
    /// tools: what it leaves unasked is named (for doctor), and setup's own
    /// leaves nothing.
    #[test]
    fn a_cursor_matcher_missing_tools_is_found() {
        let cursor = merged(Runtime::Cursor, "", &call()).unwrap();
        assert!(unasked_tools(Runtime::Cursor, &cursor).is_empty());
        let older = cursor.replace(
            CURSOR_TOOLS,
            "Write|Edit|StrReplace|MultiEdit|Delete|WebFetch|WebSearch|Task",
        );
        assert_eq!(
            unasked_tools(Runtime::Cursor, &older),
            [
                "ApplyAgentDiff",
                "WriteShellStdin",
                "Fetch",
                "ReadMcpResource",
                "ListMcpResources"
            ]
        );
        let none = cursor.replace("preToolUse", "somethingElse");
        assert_eq!(
            unasked_tools(Runtime::Cursor, &none).len(),
            CURSOR_TOOLS.split('|').count()
        );
        let claude = merged(Runtime::ClaudeCode, "", &call()).unwrap();
        assert!(unasked_tools(Runtime::ClaudeCode, &claude).is_empty());
    }

    /// Another hook in the same matcher group as an old actiongate entry,
    /// and another program whose line mentions `hook claude-code`, stay.
    #[test]
    fn merging_keeps_hooks_that_share_a_group_with_ours_and_other_programs_hooks() {
        let current = r#"{"hooks": {"PreToolUse": [
            {"matcher": "*", "hooks": [
                {"type": "command", "command": "my-audit-logger"},
                {"type": "command", "command": "'/old/path/actiongate' hook claude-code --url 'http://x' --key-file '/k' --wait 5"}]},
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "safe-chains hook claude-code --strict"}]},
            {"matcher": "Edit", "hooks": [{"type": "command", "command": "npx prettier-guard hook claude-code -q"}]}
        ]}}"#;
        let text = merged(Runtime::ClaudeCode, current, &call()).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        let pre = doc["hooks"]["PreToolUse"].as_array().unwrap();
        let commands: Vec<&str> = pre
            .iter()
            .flat_map(|g| g["hooks"].as_array().unwrap())
            .map(|h| h["command"].as_str().unwrap())
            .collect();
        assert_eq!(commands.len(), 4, "{text}");
        assert_eq!(commands[0], "my-audit-logger");
        assert_eq!(commands[1], "safe-chains hook claude-code --strict");
        assert_eq!(commands[2], "npx prettier-guard hook claude-code -q");
        assert!(commands[3].starts_with("'/bin/actiongate' hook claude-code "));
        // Copilot's and Cursor's hooks are the entries themselves.
        let copilot = r#"{"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "audit hook copilot x"}]}}"#;
        let text = merged(Runtime::Copilot, copilot, &call()).unwrap();
        assert!(text.contains("audit hook copilot x"), "{text}");
        // A list that is not a list is not silently replaced.
        let odd = r#"{"hooks": {"PreToolUse": {"matcher": "*", "hooks": []}}}"#;
        let e = merged(Runtime::ClaudeCode, odd, &call()).unwrap_err();
        assert!(e.contains("hooks.PreToolUse is not a list"), "{e}");
    }
}
