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
use crate::output::one_line;

/// The Gemini CLI contract.
pub struct Gemini;

/// Maps a Gemini CLI tool call (its built-in tool names). A file tool's
/// path is asked as each file Gemini may resolve it to ([`gemini_paths`]),
/// all of which must be allowed.
pub fn calls_of(name: &str, input: &Value, hook: &Value) -> Result<Vec<Call>, String> {
    if let Some(mcp) = hook.get("mcp_context") {
        return Ok(vec![Call::Mcp {
            server: field(mcp, "MCP", "server_name")?.to_owned(),
            tool: field(mcp, "MCP", "tool_name")?.to_owned(),
            input: input.clone(),
        }]);
    }
    let paths = || -> Result<Vec<String>, String> {
        Ok(gemini_paths(
            field(input, name, "file_path")?,
            text(hook, "cwd"),
        ))
    };
    let files = |verb: &'static str| -> Result<Vec<Call>, String> {
        Ok(paths()?
            .into_iter()
            .map(|path| Call::File { verb, path })
            .collect())
    };
    Ok(match name {
        "run_shell_command" => vec![Call::Shell(field(input, name, "command")?.to_owned())],
        "write_file" => files("write")?,
        "replace" => files(map::edit_verb(input, "old_string"))?,
        "read_file" => paths()?.into_iter().map(Call::Read).collect(),
        "glob" => vec![map::glob(
            field(input, name, "pattern")?,
            text(input, "dir_path"),
        )],
        // Lists one directory's entries: what a glob of `*` there lists.
        "list_directory" => vec![map::glob("*", Some(field(input, name, "dir_path")?))],
        "grep_search" => vec![Call::Grep(field(input, name, "pattern")?.to_owned())],
        "web_fetch" => vec![Call::Fetch(field(input, name, "prompt")?.to_owned())],
        "google_web_search" => vec![Call::Search(field(input, name, "query")?.to_owned())],
        // Gemini's own MCP resource tools: text the server wrote.
        "read_mcp_resource" => vec![map::mcp_resource(
            text(input, "server"),
            Some(field(input, name, "uri")?),
        )],
        "list_mcp_resources" => vec![map::mcp_resource(text(input, "serverName"), None)],
        other => vec![Call::Other {
            name: other.to_owned(),
            input: input.clone(),
        }],
    })
}

/// The files Gemini CLI may touch for a file tool's `file_path`, as it
/// resolves one (0.61.0: `resolveToRealPath(path.resolve(cwd,
/// resolveDefensiveToolPath(p)))`): NUL bytes dropped; a leading `@`
/// dropped (with the `/` after it) unless a file so named exists, which
/// the hook does not guess, so both are asked; the path resolved under
/// `cwd`, then percent-decoded (`decodeURIComponent`: `%2egit` is `.git`,
/// `%2F` a `/`) and resolved again. A path holding none of `%`, NUL or a
/// leading `@` is left to [`map::in_dir`], as before.
pub fn gemini_paths(raw: &str, cwd: Option<&str>) -> Vec<String> {
    if !raw.contains(['%', '\0']) && !raw.starts_with('@') {
        return vec![raw.to_owned()];
    }
    let clean = raw.replace('\0', "");
    let mut given = vec![clean.clone()];
    if clean.len() > 1
        && let Some(rest) = clean.strip_prefix('@')
    {
        let stripped = rest.trim_start_matches(['/', '\\']);
        if !stripped.is_empty() {
            given.push(stripped.to_owned());
        }
    }
    let mut out: Vec<String> = Vec::new();
    for p in given {
        let resolved = match cwd.filter(|c| c.starts_with('/')) {
            Some(c) if !p.starts_with('/') => {
                map::normalize_path(&format!("{}/{p}", c.trim_end_matches('/')))
            }
            Some(_) => map::normalize_path(&p),
            None => p,
        };
        let path = match decode_uri_component(&resolved) {
            Some(d) if d.starts_with('/') => map::normalize_path(&d),
            Some(d) => d,
            None => resolved,
        };
        if !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// JavaScript's `decodeURIComponent`: every `%XX` as the byte it names,
/// the bytes read as UTF-8; `None` where it throws (a `%` without two hex
/// digits after it, bytes that are not UTF-8), and Gemini CLI then keeps
/// the path as it was.
fn decode_uri_component(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            if !hex.bytes().all(|h| h.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Why a `replace` may edit another file than its `file_path` names:
/// Gemini CLI looks a relative path that does not exist under `cwd` up in
/// the workspace (`correctPath`), and edits a file whose path ends with
/// it (`workflows/ci.yml` edits `.github/workflows/ci.yml`).
fn replace_elsewhere(name: &str, input: &Value, cwd: Option<&str>) -> Option<String> {
    if name != "replace" {
        return None;
    }
    let path = text(input, "file_path")?;
    if path.starts_with('/') {
        return None;
    }
    let exists = cwd
        .filter(|c| c.starts_with('/'))
        .is_some_and(|c| std::path::Path::new(c).join(path).exists());
    (!exists).then(|| {
        format!(
            "Gemini CLI edits any workspace file whose path ends with `{}`, which does not exist as given",
            one_line(path)
        )
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
                unsure: replace_elsewhere(name, &input, cwd),
                label: "Gemini CLI",
                session: text(hook, "session_id").map(str::to_owned),
                // No per-call id in BeforeTool: each call is its own action.
                call_id: None,
                cwd: cwd.map(str::to_owned),
                dir,
            },
            // Gemini CLI resolves relative paths against its cwd.
            calls: map::in_dir(calls_of(name, &input, hook)?, cwd),
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

    /// Gemini CLI drops NUL bytes and a leading `@`, resolves the path and
    /// percent-decodes it; a `%` that starts no escape leaves it as it was.
    #[test]
    fn a_file_path_is_resolved_as_gemini_resolves_it() {
        let cwd = Some("/home/u/proj");
        let cases: [(&str, &[&str]); 7] = [
            ("src/a.rs", &["src/a.rs"]),
            ("%2egit/config", &["/home/u/proj/.git/config"]),
            ("%2e%2e/%2e%2e/%2e%2e/etc/x", &["/etc/x"]),
            ("%2Fetc%2Fx", &["/home/u/proj/etc/x"]),
            ("a\0b", &["/home/u/proj/ab"]),
            ("@x/y", &["/home/u/proj/@x/y", "/home/u/proj/x/y"]),
            ("100%zz", &["/home/u/proj/100%zz"]),
        ];
        for (raw, want) in cases {
            assert_eq!(gemini_paths(raw, cwd), want, "{raw}");
        }
        assert_eq!(gemini_paths("%2egit", None), [".git"]);
        assert_eq!(decode_uri_component("%C3%A9"), Some("é".to_owned()));
        assert_eq!(decode_uri_component("%C3"), None);
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
            "Gemini CLI in /home/u/proj, this call in \"/home/u/proj/packages/web\" (session s1)"
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
            "Gemini CLI in /home/u/proj, this call in \"/etc\" (session s1)"
        );
    }
}
