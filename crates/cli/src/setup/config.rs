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

/// Whether a hook entry (any shape) is one of ours for this runtime.
fn is_ours(entry: &Value, rt: Runtime) -> bool {
    let needle = format!(" hook {} ", rt.name());
    let mut found = false;
    visit_strings(entry, &mut |s| found |= s.contains(&needle));
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

/// Replaces earlier actiongate entries of `event` with `entry`, keeping
/// the others in order.
fn put_entry(hooks: &mut Map<String, Value>, event: &str, entry: Value, rt: Runtime) {
    let list = hooks.entry(event.to_owned()).or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    if let Value::Array(items) = list {
        items.retain(|e| !is_ours(e, rt));
        items.push(entry);
    }
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
                put_entry(hooks, event, entry, rt);
            }
            // What ran is reported, so a run nobody decided is seen.
            if rt == Runtime::ClaudeCode {
                let entry = json!({"matcher": "*", "hooks": [{"type": "command", "command": cmd, "timeout": 15}]});
                put_entry(hooks, "PostToolUse", entry, rt);
            }
        }
        Runtime::Gemini => {
            let hooks = hooks_of(&mut doc)?;
            let entry = json!({"hooks": [{"type": "command", "name": "actiongate", "command": cmd, "timeout": t * 1000}]});
            put_entry(hooks, "BeforeTool", entry, rt);
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
                put_entry(hooks, event, entry.clone(), rt);
            }
            // File changes: shell and MCP calls are asked above already.
            let mut edits = entry.clone();
            edits["matcher"] = json!("Write|Edit|StrReplace|MultiEdit|Delete");
            put_entry(hooks, "preToolUse", edits, rt);
        }
        Runtime::Copilot => {
            doc.as_object_mut()
                .ok_or("the config file is not a JSON object")?
                .entry("version")
                .or_insert(json!(1));
            let hooks = hooks_of(&mut doc)?;
            let entry = json!({"type": "command", "bash": cmd, "timeoutSec": t});
            put_entry(hooks, "preToolUse", entry, rt);
        }
        Runtime::Opencode => unreachable!("handled above"),
    }
    let mut text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    text.push('\n');
    Ok(text)
}

/// Whether the config text holds actiongate's hook for this runtime.
pub fn installed(rt: Runtime, text: &str) -> bool {
    if rt == Runtime::Opencode {
        return text.contains("actiongate:config");
    }
    serde_json::from_str::<Value>(text).is_ok_and(|doc| is_ours(&doc, rt))
}

/// Whether every actiongate hook command in the config text refuses when
/// the hook cannot answer: ends in `|| exit 2` ([`HookCall::command`]).
/// Cursor's entry has `failClosed` and opencode's plugin refuses on its
/// own, so theirs always do.
pub fn fails_closed(rt: Runtime, text: &str) -> bool {
    if matches!(rt, Runtime::Cursor | Runtime::Opencode) {
        return true;
    }
    let Ok(doc) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    let needle = format!(" hook {} ", rt.name());
    let mut all = true;
    visit_strings(&doc, &mut |s| {
        if s.contains(&needle) && !s.trim_end().ends_with("|| exit 2") {
            all = false;
        }
    });
    all
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
        assert!(is_ours(&pre[1], Runtime::ClaudeCode));
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
        }
        let cursor = merged(Runtime::Cursor, "", &call()).unwrap();
        assert!(!cursor.contains("|| exit 2") && fails_closed(Runtime::Cursor, &cursor));
    }
}
