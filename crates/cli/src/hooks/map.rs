//! One mapping from any runtime's tool call to the daemon's actions, so
//! one profile governs every agent: each runtime module turns its tool
//! names and inputs into [`Call`]s, and [`Call::mapped`] gives the tool and
//! detail the presets already understand (`tool:bash:<command>`,
//! `tool:file:edit <path>`, `tool:mcp__<server>__<tool>:<input>`, the
//! MCP proxy's spelling, …). [`in_dir`] joins the relative paths of a
//! call with the runtime's working directory, so the action names the
//! file the runtime will touch.

use serde_json::Value;

/// The daemon's tool names: 1-128 of `A-Z a-z 0-9 _ - .`.
const MAX_TOOL: usize = 128;

/// The tool names this mapping gives known calls (and the presets' and
/// the reference executor's), in any case: another tool of a runtime that
/// happens to be named so (a runtime's own `Read` this module does not
/// map, a plugin's `git`) must not pass for one of them, its input read as
/// the detail a rule for them was written against. It becomes
/// `tool:other:<name> <input>`.
const RESERVED: &[&str] = &[
    "bash",
    "sh",
    "file",
    "Read",
    "Glob",
    "Grep",
    "WebFetch",
    "WebSearch",
    "mcp",
    "mcp-resource",
    "mcp-prompt",
    "git",
    "fs",
    "other",
];

/// A tool call mapped to an action: tool and detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapped {
    /// The daemon's tool name.
    pub tool: String,
    /// The detail.
    pub detail: String,
}

impl Mapped {
    /// The action string the policy sees.
    pub fn action_string(&self) -> String {
        format!("tool:{}:{}", self.tool, self.detail)
    }
}

/// What a tool call does, whichever runtime asks.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// A shell command line.
    Shell(String),
    /// A command line for the shell whose language `tool` names (`bash`,
    /// `sh`, or a shell no analyser reads, by its own name).
    ShellOf {
        /// The tool it is asked as.
        tool: String,
        /// The command line.
        line: String,
    },
    /// A change to a file: `verb` is `edit`, `write`, `delete` or
    /// `notebook_edit`.
    File {
        /// What is done to the file.
        verb: &'static str,
        /// The file.
        path: String,
    },
    /// Reading a file.
    Read(String),
    /// Listing files by a glob.
    Glob {
        /// The pattern.
        pattern: String,
        /// The directory it is matched under, when the call names one.
        dir: Option<String>,
    },
    /// Searching file contents.
    Grep(String),
    /// Fetching a URL.
    Fetch(String),
    /// A web search.
    Search(String),
    /// Reading an MCP server's resource through the runtime itself (the
    /// MCP proxy's `mcp-resource`): text that server wrote.
    McpResource {
        /// The server's name.
        server: String,
        /// The resource.
        uri: String,
    },
    /// An MCP server's tool.
    Mcp {
        /// The server's name.
        server: String,
        /// The tool's name.
        tool: String,
        /// Its input.
        input: Value,
    },
    /// Any other tool: its name and input.
    Other {
        /// The runtime's name for it.
        name: String,
        /// Its input.
        input: Value,
    },
}

impl Call {
    /// The daemon's tool and detail for this call.
    pub fn mapped(&self) -> Mapped {
        let m = |tool: &str, detail: String| Mapped {
            tool: tool.to_owned(),
            detail,
        };
        match self {
            Call::Shell(cmd) => m("bash", cmd.clone()),
            Call::ShellOf { tool, line } => m(&sanitize_tool(tool), line.clone()),
            Call::File { verb, path } => m("file", format!("{verb} {}", normalize_path(path))),
            Call::Read(path) => m("Read", normalize_path(path)),
            Call::Glob { pattern, dir } => m("Glob", glob_detail(pattern, dir.as_deref())),
            Call::Grep(p) => m("Grep", p.clone()),
            Call::Fetch(u) => m("WebFetch", u.clone()),
            Call::Search(q) => m("WebSearch", q.clone()),
            Call::McpResource { server, uri } => {
                m("mcp-resource", format!("{} {}", one_word(server), uri))
            }
            Call::Mcp {
                server,
                tool,
                input,
            } => {
                // The MCP proxy's spelling, so one rule covers both ways
                // in; a name that is not plain as a tool name (it would
                // be rewritten, and could become another tool's) keeps
                // server and tool in the detail of the tool `mcp`.
                let name = format!("mcp__{server}__{tool}");
                if sanitize_tool(&name) == name {
                    m(&name, input.to_string())
                } else {
                    m("mcp", format!("{server}__{tool} {input}"))
                }
            }
            Call::Other { name, input } => {
                let tool = sanitize_tool(name);
                if RESERVED.iter().any(|r| r.eq_ignore_ascii_case(&tool)) {
                    m("other", format!("{name} {input}"))
                } else {
                    m(&tool, input.to_string())
                }
            }
        }
    }

    /// Why a path this call names may lead elsewhere than it is asked
    /// as: a control character in it (a line break: a rule's `.` stops
    /// there), or a `..` after a step holding a `:` (`/srv/prod/a.env:/..`),
    /// which a runtime splitting a patch header at its `:` reads as the
    /// step before it (the lexical `..` here does not).
    pub fn unclear_path(&self) -> Option<&'static str> {
        let unclear = |s: &str| {
            if s.chars().any(char::is_control) {
                return Some("a file path holds a control character (a line break, say)");
            }
            let steps: Vec<&str> = s.split(['/', '\\']).collect();
            let colon_then_up = steps.iter().enumerate().any(|(i, step)| {
                // A drive (`C:`) standing first is a root, not a name.
                step.contains(':') && !(i == 0 && step.len() == 2) && steps[i + 1..].contains(&"..")
            });
            colon_then_up.then_some(
                "a file path climbs (`..`) out of a step holding a `:`, which a runtime may read as the end of the path",
            )
        };
        match self {
            Call::File { path, .. } | Call::Read(path) => unclear(path),
            Call::Glob { pattern, dir } => {
                unclear(pattern).or_else(|| dir.as_deref().and_then(unclear))
            }
            _ => None,
        }
    }

    /// This call with its relative paths joined with the absolute
    /// directory `base` (a glob naming no directory is matched under it),
    /// and those that climb out of `~` resolved from `home`.
    fn placed(self, base: Option<&str>, home: Option<&str>) -> Call {
        let at = |path: &str| {
            let joined = match base {
                Some(b) => join(b, path),
                None => path.to_owned(),
            };
            from_home(joined, home)
        };
        match self {
            Call::File { verb, path } => Call::File {
                verb,
                path: at(&path),
            },
            Call::Read(path) => Call::Read(at(&path)),
            Call::Glob { pattern, dir } => Call::Glob {
                pattern,
                dir: match dir {
                    Some(d) if !d.is_empty() => Some(at(&d)),
                    d => base.map(str::to_owned).or(d),
                },
            },
            other => other,
        }
    }
}

/// `name` as one word of a detail: white space and control characters
/// become `_`, so what follows it cannot pass for part of it.
fn one_word(name: &str) -> String {
    if name.is_empty() {
        return "_".to_owned();
    }
    name.chars()
        .map(|c| {
            if c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// The calls with their relative paths joined with the working directory
/// `base` (the runtime's `cwd`, or the directory the call itself names),
/// which is where the runtime resolves them, so that a rule over absolute
/// paths sees the file that is touched: `../../srv/prod/x` from
/// `/home/u/proj` is `/srv/prod/x`. Without an absolute `base` the paths
/// stay as given: where they lead is not known here, and only rules
/// written for relative paths match them.
pub fn in_dir(calls: Vec<Call>, base: Option<&str>) -> Vec<Call> {
    let home = std::env::var("HOME").ok();
    placed(calls, base, home.as_deref())
}

/// [`in_dir`] with the home directory given.
pub(crate) fn placed(calls: Vec<Call>, base: Option<&str>, home: Option<&str>) -> Vec<Call> {
    let base = base.filter(|b| is_absolute(b));
    calls.into_iter().map(|c| c.placed(base, home)).collect()
}

/// `path` from `~` whose `..` climb out of it (`~/../../srv/x`) resolved
/// from the absolute `home`, the runtime's own (the hook runs as its
/// user): it names a file outside the home directory, which a rule over
/// absolute paths must see. A path that stays below `~` keeps it, as the
/// presets' rules name it (`~/.ssh/…`); `~user` is not known here.
fn from_home(path: String, home: Option<&str>) -> String {
    let Some(home) = home.filter(|h| h.starts_with('/')) else {
        return path;
    };
    match normalize_path(&path).strip_prefix("~/..") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            format!("{}/..{rest}", home.trim_end_matches('/'))
        }
        _ => path,
    }
}

/// `path` under `base` when it is relative. An absolute path stays, and
/// so does a path from the home directory (`~`, `~/…`), which the
/// runtimes expand themselves. Under a Windows `base` a `\` separates
/// steps as `/` does, a path from `\` starts at the root of `base`'s
/// drive, and one naming another drive without its root (`D:x`, from
/// that drive's own working directory) stays as written: where it leads
/// is not known here.
fn join(base: &str, path: &str) -> String {
    if let Some((root, _)) = windows_root(base) {
        if windows_root(path).is_some() {
            return path.to_owned();
        }
        let steps = path.replace('\\', "/");
        // Two separators of either kind start a share, as Windows reads
        // them (`//srv/share`, `/\srv\share`): never a step under the drive.
        if let Some(share) = steps.strip_prefix("//") {
            return format!("\\\\{share}");
        }
        if steps == "~" || steps.starts_with("~/") {
            return steps;
        }
        if steps.starts_with('/') {
            return format!("{root}{steps}");
        }
        if path.as_bytes().get(1) == Some(&b':') {
            return path.to_owned();
        }
        return format!("{}/{steps}", base.trim_end_matches(['/', '\\']));
    }
    // Under a POSIX directory only `/` starts at a root: `C:/..` is a
    // directory named `C:` and its parent, and `\` is part of a name.
    if path.starts_with('/') || path == "~" || path.starts_with("~/") {
        path.to_owned()
    } else {
        format!("{}/{path}", base.trim_end_matches('/'))
    }
}

/// Whether `path` starts at a root: `/`, or a Windows one
/// ([`windows_root`]).
fn is_absolute(path: &str) -> bool {
    path.starts_with('/') || windows_root(path).is_some()
}

/// A Windows path from a root: the root as actions name it and the rest
/// from its first separator, `\` made `/`. Roots: a drive's (`C:\`,
/// `c:/`: `C:`, the letter upper case), a share's (`\\server\share`:
/// `//server/share`), and a path given to Windows as is (`\\?\`, `\\.\`:
/// the drive or share it names, else `//?`, `//.`).
/// The path given to Windows as is is read once, never again inside
/// itself: `\\?\UNC\?\UNC\…` is a share named `?\UNC`.
fn windows_root(path: &str) -> Option<(String, String)> {
    if let Some(drive) = drive_root(path) {
        return Some(drive);
    }
    let rest = path.strip_prefix("\\\\")?.replace('\\', "/");
    if let Some(verbatim) = rest.strip_prefix("?/").or_else(|| rest.strip_prefix("./")) {
        let unc = verbatim
            .strip_prefix("UNC/")
            .or_else(|| verbatim.strip_prefix("unc/"));
        let named = match unc {
            Some(share) => share_root(share),
            None => drive_root(verbatim),
        };
        return named.or_else(|| Some((format!("//{}", &rest[..1]), format!("/{verbatim}"))));
    }
    share_root(&rest)
}

/// A drive's root (`C:\`, `c:/`): `C:` and the rest, `\` made `/`.
fn drive_root(path: &str) -> Option<(String, String)> {
    let b = path.as_bytes();
    if b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && matches!(b[2], b'\\' | b'/') {
        let drive = char::from(b[0]).to_ascii_uppercase();
        return Some((format!("{drive}:"), path[2..].replace('\\', "/")));
    }
    None
}

/// A share's root from `server/share/rest` (after the leading `\\`, with
/// `/`): `//server/share` and `/rest`.
fn share_root(rest: &str) -> Option<(String, String)> {
    let mut steps = rest.splitn(3, '/');
    let (server, share) = (steps.next()?, steps.next()?);
    if server.is_empty() || share.is_empty() {
        return None;
    }
    Some((
        format!("//{server}/{share}"),
        format!("/{}", steps.next().unwrap_or("")),
    ))
}

/// Where a grep tool's call (`is_grep`) searches, from its input's first
/// of `keys` under `cwd`, resolved; `None` for other tools or no path.
/// Not in its action (`tool:Grep:<pattern>`): the reason names it.
pub fn grep_dir(is_grep: bool, cwd: Option<&str>, input: &Value, keys: &[&str]) -> Option<String> {
    if !is_grep {
        return None;
    }
    let path = keys
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str));
    call_dir(cwd, path)
}

/// The directory a call names for itself (a shell's `workdir`, …) under
/// the working directory `cwd`, resolved: where the call runs.
pub fn call_dir(cwd: Option<&str>, dir: Option<&str>) -> Option<String> {
    let dir = dir.filter(|d| !d.is_empty())?;
    let joined = match cwd.filter(|c| is_absolute(c)) {
        Some(c) => join(c, dir),
        None => dir.to_owned(),
    };
    Some(normalize_path(&joined))
}

/// A path with `.`, `..` and repeated `/` resolved lexically, so that the
/// action names the file the runtime will touch: `/repo/../etc/x` is
/// `/etc/x`, which a pattern allowing `/repo/.*` must not cover. A
/// relative path (one [`in_dir`] had no absolute working directory for)
/// keeps the `..` that climb above its start (they lead out of the working
/// directory, which no relative pattern should cover by accident).
/// Symbolic links are not followed: the file may not exist yet. A
/// Windows path from a root is resolved the same below its root, written
/// with `/`: `C:\proj\..\Windows\x` is `C:/Windows/x`. (A relative one
/// with `\` stays as written: only under a Windows working directory is
/// `\` known to separate steps.)
pub fn normalize_path(path: &str) -> String {
    if let Some((root, rest)) = windows_root(path) {
        return format!("{root}{}", normalize_path(&rest));
    }
    let absolute = path.starts_with('/');
    // `~` and `~user` are a directory the runtime expands, not a step a
    // `..` can take back: `~/a/../../x` is above the home directory, not
    // the relative `x`.
    let home = path.starts_with('~');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." && !(home && parts.len() == 1) => {
                    parts.pop();
                }
                // `/..` is `/`.
                _ if absolute => {}
                _ => parts.push(".."),
            },
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
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

/// A string field of a tool's input, or why the call cannot be mapped.
pub fn field<'a>(input: &'a Value, tool: &str, key: &str) -> Result<&'a str, String> {
    input
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the {tool} call has no input field `{key}`"))
}

/// The first of several string fields that is present.
pub fn any_field<'a>(input: &'a Value, tool: &str, keys: &[&str]) -> Result<&'a str, String> {
    keys.iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .ok_or_else(|| format!("the {tool} call has none of the input fields {keys:?}"))
}

/// Every distinct value of several fields naming the same thing (a path
/// spelled `file_path`, `path`, …), or why the call cannot be mapped. The
/// model writes the input: which of two fields a runtime honours is not
/// for the hook to guess, so each one present is asked about; one that is
/// present but not a string is refused.
pub fn all_fields<'a>(input: &'a Value, tool: &str, keys: &[&str]) -> Result<Vec<&'a str>, String> {
    let mut found: Vec<&str> = Vec::new();
    for k in keys {
        match input.get(*k) {
            None => {}
            Some(Value::String(s)) if found.contains(&s.as_str()) => {}
            Some(Value::String(s)) => found.push(s),
            Some(_) => {
                return Err(format!(
                    "the {tool} call's input field `{k}` is not a string"
                ));
            }
        }
    }
    if found.is_empty() {
        return Err(format!(
            "the {tool} call has none of the input fields {keys:?}"
        ));
    }
    Ok(found)
}

/// One file call per path of [`all_fields`].
pub fn file_calls(
    verb: &'static str,
    input: &Value,
    tool: &str,
    keys: &[&str],
) -> Result<Vec<Call>, String> {
    Ok(all_fields(input, tool, keys)?
        .into_iter()
        .map(|p| Call::File {
            verb,
            path: p.to_owned(),
        })
        .collect())
}

/// One read call per path of [`all_fields`].
pub fn read_calls(input: &Value, tool: &str, keys: &[&str]) -> Result<Vec<Call>, String> {
    Ok(all_fields(input, tool, keys)?
        .into_iter()
        .map(|p| Call::Read(p.to_owned()))
        .collect())
}

/// A glob call: `pattern`, matched under `dir` when given.
pub fn glob(pattern: &str, dir: Option<&str>) -> Call {
    Call::Glob {
        pattern: pattern.to_owned(),
        dir: dir.map(str::to_owned),
    }
}

/// `Glob`'s detail: `<dir>/<pattern>` unless the pattern is absolute, with
/// its literal leading steps (those before the first step holding a
/// wildcard or an escape) resolved as a file path is, so that
/// `/r/../srv/*` is asked as `/srv/*`. What follows a wildcard stays as
/// written: `*/..` is not lexically anything shorter.
fn glob_detail(pattern: &str, dir: Option<&str>) -> String {
    let full = match dir {
        Some(d) if !d.is_empty() && !pattern.starts_with('/') => {
            format!("{}/{pattern}", d.trim_end_matches('/'))
        }
        _ => pattern.to_owned(),
    };
    let mut literal = 0;
    for step in full.split_inclusive('/') {
        if step.contains(['*', '?', '[', ']', '{', '}', '\\']) {
            break;
        }
        literal += step.len();
    }
    let (head, rest) = full.split_at(literal);
    if head.is_empty() {
        return full;
    }
    match normalize_path(head) {
        h if rest.is_empty() => h,
        h if h == "." => rest.to_owned(),
        h if h.ends_with('/') => format!("{h}{rest}"),
        h => format!("{h}/{rest}"),
    }
}

/// An MCP tool named `mcp__<server>__<tool>` (Claude Code, Codex), or
/// `None` when the name is not of that form.
pub fn mcp_double_underscore(name: &str, input: &Value) -> Option<Call> {
    let rest = name.strip_prefix("mcp__")?;
    let (server, tool) = rest.split_once("__")?;
    if server.is_empty() || tool.is_empty() {
        return None;
    }
    Some(Call::Mcp {
        server: server.to_owned(),
        tool: tool.to_owned(),
        input: input.clone(),
    })
}

/// Reading or listing an MCP server's resources through the runtime's own
/// tool (a listing names no resource: `*`; a runtime that does not say
/// which server: `_`). Either is text that server wrote, so it taints.
pub fn mcp_resource(server: Option<&str>, uri: Option<&str>) -> Call {
    Call::McpResource {
        server: server.unwrap_or_default().to_owned(),
        uri: uri.unwrap_or("*").to_owned(),
    }
}

/// An edit's verb: `write` when it creates its file, which Claude Code's
/// `Edit`, Gemini CLI's `replace` and opencode's `edit` do for an empty
/// old string (`key`, in the input or in any of its `edits`), else `edit`.
pub fn edit_verb(input: &Value, key: &str) -> &'static str {
    let empty = |v: &Value| v.get(key).and_then(Value::as_str) == Some("");
    let edits = input.get("edits").and_then(Value::as_array);
    if empty(input) || edits.is_some_and(|e| e.iter().any(empty)) {
        "write"
    } else {
        "edit"
    }
}

/// Whether JavaScript's `trim()` removes `c`: its white space and line
/// terminators, which are Rust's white space but U+0085, and U+FEFF.
pub fn is_js_space(c: char) -> bool {
    c == '\u{feff}' || (c.is_whitespace() && c != '\u{85}')
}

/// `s` trimmed as JavaScript's `String.prototype.trim` trims it: the
/// runtimes written in JavaScript (Claude Code, opencode, Gemini CLI)
/// trim a path so before they use it.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

/// The files a Codex `apply_patch` body touches, each as a file call
/// (`*** Add File:` writes, `*** Update File:` edits, `*** Delete File:`
/// deletes; an update followed by `*** Move to:` deletes its file and
/// writes the one moved to, which it replaces), headers found as Codex
/// finds them, with surrounding whitespace ignored. A patch that names no file is refused:
/// nothing could be checked.
pub fn patch_files(patch: &str) -> Result<Vec<Call>, String> {
    let mut calls = Vec::new();
    // Where the calls of the last header start.
    let mut last = 0;
    for line in patch.lines() {
        // Codex trims every hunk header ("tolerant of extra padding around
        // marker strings"), so an indented header still names a file it
        // touches. A context line that merely looks like one is asked too:
        // more questions, never fewer.
        let line = line.trim_matches(|c: char| c.is_whitespace() || is_js_space(c));
        // opencode needs no space after the colon; Codex does. Both are
        // taken: a header Codex refuses only makes one question more.
        let found = [
            ("*** Add File:", "write"),
            ("*** Update File:", "edit"),
            ("*** Delete File:", "delete"),
            ("*** Move to:", "write"),
        ]
        .iter()
        .find_map(|(prefix, verb)| line.strip_prefix(prefix).map(|p| (*verb, p)));
        if let Some((verb, named)) = found {
            // Codex trims as Rust does, opencode as JavaScript does (U+FEFF
            // too, U+0085 not): where the two differ, each file is asked.
            let (rust, js) = (named.trim(), js_trim(named));
            if rust.is_empty() || js.is_empty() {
                return Err("the patch names a file with an empty path".to_owned());
            }
            if verb == "write" && line.starts_with("*** Move to:") {
                // The file updated is moved away: it is gone.
                for call in calls.get_mut(last..).unwrap_or_default() {
                    if let Call::File { verb: moved, .. } = call
                        && *moved == "edit"
                    {
                        *moved = "delete";
                    }
                }
            }
            last = calls.len();
            calls.push(Call::File {
                verb,
                path: rust.to_owned(),
            });
            if js != rust {
                calls.push(Call::File {
                    verb,
                    path: js.to_owned(),
                });
            }
        }
    }
    if calls.is_empty() {
        return Err("the patch names no file".to_owned());
    }
    Ok(calls)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_map_to_the_preset_action_strings() {
        let cases = [
            (Call::Shell("ls -la".into()), "tool:bash:ls -la"),
            (
                Call::File {
                    verb: "edit",
                    path: "/r/a.rs".into(),
                },
                "tool:file:edit /r/a.rs",
            ),
            (Call::Read("/r/a".into()), "tool:Read:/r/a"),
            (
                Call::Mcp {
                    server: "github".into(),
                    tool: "create_issue".into(),
                    input: json!({"title": "t"}),
                },
                r#"tool:mcp__github__create_issue:{"title":"t"}"#,
            ),
            (
                Call::Mcp {
                    server: "my server".into(),
                    tool: "create:issue".into(),
                    input: json!({"title": "t"}),
                },
                r#"tool:mcp:my server__create:issue {"title":"t"}"#,
            ),
            (
                Call::Other {
                    name: "my tool!".into(),
                    input: json!({}),
                },
                "tool:my_tool_:{}",
            ),
            (
                Call::Other {
                    name: "Read".into(),
                    input: json!({"file_path": "/x"}),
                },
                r#"tool:other:Read {"file_path":"/x"}"#,
            ),
            (
                Call::Other {
                    name: "glob".into(),
                    input: json!({}),
                },
                "tool:other:glob {}",
            ),
            (
                Call::Other {
                    name: "GIT".into(),
                    input: json!({"args": "push"}),
                },
                r#"tool:other:GIT {"args":"push"}"#,
            ),
        ];
        for (call, want) in cases {
            assert_eq!(call.mapped().action_string(), want);
        }
        assert_eq!(sanitize_tool(""), "unknown");
        assert_eq!(sanitize_tool(&"x".repeat(300)).len(), 128);
    }

    #[test]
    fn paths_are_resolved_lexically() {
        let cases = [
            ("/r/a.rs", "/r/a.rs"),
            ("/r/../etc/x", "/etc/x"),
            ("/r/./s//t/", "/r/s/t"),
            ("/../../x", "/x"),
            ("src/a.rs", "src/a.rs"),
            ("src/../../x", "../x"),
            ("./a", "a"),
            ("..", ".."),
            ("", "."),
            ("C:\\x", "C:/x"),
            ("a\\..\\..\\x", "a\\..\\..\\x"),
            ("~/a/../../x", "~/../x"),
            ("~/../../x", "~/../../x"),
            ("~u/./a/../../.ssh/k", "~u/../.ssh/k"),
            ("~/a/./b/../c", "~/a/c"),
        ];
        for (path, want) in cases {
            assert_eq!(normalize_path(path), want, "{path}");
        }
    }

    #[test]
    fn relative_paths_are_joined_with_an_absolute_working_directory() {
        let calls = || {
            vec![
                Call::File {
                    verb: "write",
                    path: "../../srv/x".into(),
                },
                Call::Read("/etc/x".into()),
                Call::Read("~/.ssh/id_ed25519".into()),
                Call::Read("~other/x".into()),
                glob("*.rs", None),
                glob("**", Some("../o")),
                glob("/a/*", Some("b")),
                Call::Shell("cat ../x".into()),
            ]
        };
        let strings = |calls: Vec<Call>| -> Vec<String> {
            calls.iter().map(|c| c.mapped().action_string()).collect()
        };
        assert_eq!(
            strings(in_dir(calls(), Some("/home/u/p/"))),
            [
                "tool:file:write /home/srv/x",
                "tool:Read:/etc/x",
                "tool:Read:~/.ssh/id_ed25519",
                "tool:Read:/home/u/p/~other/x",
                "tool:Glob:/home/u/p/*.rs",
                "tool:Glob:/home/u/o/**",
                "tool:Glob:/a/*",
                "tool:bash:cat ../x",
            ]
        );
        for base in [None, Some("p")] {
            assert_eq!(strings(in_dir(calls(), base)), strings(calls()), "{base:?}");
        }
        assert_eq!(
            call_dir(Some("/p/q"), Some("../o")).as_deref(),
            Some("/p/o")
        );
        assert_eq!(
            call_dir(Some("/p"), Some("/w/./x")).as_deref(),
            Some("/w/x")
        );
        assert_eq!(call_dir(None, Some("b/./c")).as_deref(), Some("b/c"));
        assert_eq!(call_dir(Some("/p"), Some("")), None);
        assert_eq!(call_dir(Some("/p"), None), None);
    }

    #[test]
    fn windows_paths_are_joined_and_resolved_below_their_root() {
        let cases = [
            ("C:\\proj\\..\\Windows\\x", "C:/Windows/x"),
            ("c:/proj/./a//b", "C:/proj/a/b"),
            ("C:\\..\\..\\x", "C:/x"),
            ("C:\\", "C:/"),
            ("\\\\srv\\share\\a\\..\\..\\..\\x", "//srv/share/x"),
            ("\\\\?\\C:\\proj\\..\\x", "C:/x"),
            ("\\\\?\\UNC\\srv\\share\\x", "//srv/share/x"),
            ("\\\\.\\PhysicalDrive0", "//./PhysicalDrive0"),
        ];
        for (path, want) in cases {
            assert_eq!(normalize_path(path), want, "{path}");
        }
        let base = Some("C:\\Users\\dev\\proj");
        let strings = |paths: &[&str]| -> Vec<String> {
            let calls = paths.iter().map(|p| Call::Read((*p).into())).collect();
            in_dir(calls, base)
                .iter()
                .map(|c| c.mapped().action_string())
                .collect()
        };
        assert_eq!(
            strings(&[
                "src\\main.rs",
                "..\\..\\..\\Windows\\System32\\x",
                "\\Windows\\x",
                "/etc/x",
                "D:\\data\\x",
                "D:x",
                "\\\\?\\C:\\Windows\\x",
                "~/x",
                "~\\.ssh\\k",
                "//DATA.evil.test/share/leak.txt",
                "/\\DATA.evil.test\\share\\leak.txt",
                "\\/DATA.evil.test/share/leak.txt",
            ]),
            [
                "tool:Read:C:/Users/dev/proj/src/main.rs",
                "tool:Read:C:/Windows/System32/x",
                "tool:Read:C:/Windows/x",
                "tool:Read:C:/etc/x",
                "tool:Read:D:/data/x",
                "tool:Read:D:x",
                "tool:Read:C:/Windows/x",
                "tool:Read:~/x",
                "tool:Read:~/.ssh/k",
                "tool:Read://DATA.evil.test/share/leak.txt",
                "tool:Read://DATA.evil.test/share/leak.txt",
                "tool:Read://DATA.evil.test/share/leak.txt",
            ]
        );
        assert_eq!(
            call_dir(base, Some("..\\web")).as_deref(),
            Some("C:/Users/dev/web")
        );
    }

    #[test]
    fn a_globs_literal_leading_steps_are_resolved() {
        let cases = [
            ("**/*.rs", Some("/r/"), "/r/**/*.rs"),
            ("src/../*.rs", Some("/r"), "/r/*.rs"),
            ("*/../x", Some("/r"), "/r/*/../x"),
            ("/r/../etc/*", Some("/x"), "/etc/*"),
            ("/../*", None, "/*"),
            ("src/main.rs", Some("/r/x/.."), "/r/src/main.rs"),
            ("**/*.rs", None, "**/*.rs"),
            ("./src/*.rs", None, "src/*.rs"),
            ("../*", None, "../*"),
            ("a\\*b/../c", None, "a\\*b/../c"),
            ("x/{a,b}/../y", None, "x/{a,b}/../y"),
        ];
        for (pattern, dir, want) in cases {
            assert_eq!(glob_detail(pattern, dir), want, "{pattern} {dir:?}");
        }
    }

    #[test]
    fn mcp_names_split_into_server_and_tool() {
        let c = mcp_double_underscore("mcp__github__create_issue", &json!({})).unwrap();
        assert_eq!(
            c.mapped(),
            Mapped {
                tool: "mcp__github__create_issue".into(),
                detail: "{}".into()
            }
        );
        assert!(mcp_double_underscore("mcp__github", &json!({})).is_none());
        assert!(mcp_double_underscore("Bash", &json!({})).is_none());
    }

    #[test]
    fn patches_name_each_file_and_an_empty_patch_is_refused() {
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** Update File: src/b.rs\n*** Move to: src/c.rs\n@@\n-x\n+y\n*** Delete File: d\n*** End Patch\n";
        let got: Vec<String> = patch_files(patch)
            .unwrap()
            .iter()
            .map(|c| c.mapped().action_string())
            .collect();
        assert_eq!(
            got,
            [
                "tool:file:write a.txt",
                "tool:file:delete src/b.rs",
                "tool:file:write src/c.rs",
                "tool:file:delete d"
            ]
        );
        assert!(patch_files("*** Begin Patch\n*** End Patch").is_err());
    }

    #[test]
    fn under_a_posix_directory_a_windows_looking_path_is_relative() {
        // On Linux and macOS `C:/..` is a directory named `C:` and its
        // parent; `\` is a character of a name.
        let write = |path: &str| Call::File {
            verb: "write",
            path: path.into(),
        };
        let got: Vec<String> = in_dir(
            vec![
                write("C:/../../../../srv/prod/app.env"),
                write("c:\\x"),
                write("\\\\?\\C:\\x"),
                Call::Read("C:/../../../../srv/prod/secrets.env".into()),
            ],
            Some("/home/dev/proj"),
        )
        .iter()
        .map(|c| c.mapped().action_string())
        .collect();
        assert_eq!(
            got,
            [
                "tool:file:write /srv/prod/app.env",
                "tool:file:write /home/dev/proj/c:\\x",
                "tool:file:write /home/dev/proj/\\\\?\\C:\\x",
                "tool:Read:/srv/prod/secrets.env",
            ]
        );
        assert_eq!(
            call_dir(Some("/p/q"), Some("C:/../../x")).as_deref(),
            Some("/p/x")
        );
    }

    #[test]
    fn a_deeply_nested_verbatim_path_is_read_without_recursion() {
        let deep = format!("\\\\{}srv\\share\\x", "?\\UNC\\".repeat(50_000));
        // Answers (the process would abort on a stack overflow), and fast.
        let started = std::time::Instant::now();
        let got = normalize_path(&deep);
        assert!(got.starts_with("//?/UNC/"), "{:.40}", got);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert_eq!(
            call_dir(Some("C:\\p"), Some(&deep)).map(|d| d.len() > 100_000),
            Some(true)
        );
    }

    #[test]
    fn a_path_that_climbs_out_of_home_is_resolved_from_home() {
        let calls = || {
            vec![
                Call::File {
                    verb: "write",
                    path: "~/../../srv/prod/app.env".into(),
                },
                Call::Read("~/.ssh/id_ed25519".into()),
                Call::Read("~/a/../b".into()),
                Call::Read("~/a/../../../etc/x".into()),
                glob("*", Some("~/../..")),
            ]
        };
        let strings = |calls: Vec<Call>| -> Vec<String> {
            calls.iter().map(|c| c.mapped().action_string()).collect()
        };
        assert_eq!(
            strings(placed(calls(), Some("/w"), Some("/home/dev"))),
            [
                "tool:file:write /srv/prod/app.env",
                "tool:Read:~/.ssh/id_ed25519",
                "tool:Read:~/b",
                "tool:Read:/etc/x",
                "tool:Glob:/*",
            ]
        );
        // Without a home directory (or an absolute one) it stays as written.
        for home in [None, Some("dev")] {
            assert_eq!(
                strings(placed(calls(), Some("/w"), home))[0],
                "tool:file:write ~/../../srv/prod/app.env"
            );
        }
    }

    /// opencode trims a header's path with JavaScript's `trim` (U+FEFF
    /// too, U+0085 not), Codex with Rust's: where they differ, both files
    /// are asked, and a move deletes the file under either reading.
    #[test]
    fn a_patch_path_is_asked_as_each_runtime_trims_it() {
        assert_eq!(js_trim("\u{feff}\u{a0}\u{3000}a\u{2029}"), "a");
        assert_eq!(js_trim("\u{85}a"), "\u{85}a");
        let patch = "*** Add File: \u{feff}/srv/x\n+y\n*** Update File: \u{85}a\n*** Move to: b\n";
        let got: Vec<String> = patch_files(patch)
            .unwrap()
            .iter()
            .map(|c| c.mapped().action_string())
            .collect();
        assert_eq!(
            got,
            [
                "tool:file:write \u{feff}/srv/x",
                "tool:file:write /srv/x",
                "tool:file:delete a",
                "tool:file:delete \u{85}a",
                "tool:file:write b",
            ]
        );
    }

    #[test]
    fn patch_headers_are_found_with_or_without_a_space_after_the_colon() {
        // opencode's parser takes `*** Add File:x` as a header (prefix
        // without the space, name trimmed).
        let patch = "*** Begin Patch\n*** Add File: a\n+x\n*** Add File:.git/hooks/pre-commit\n+y\n*** Update File:\tb\n*** Move to:c\n*** Delete File:d\n*** End Patch";
        let got: Vec<String> = patch_files(patch)
            .unwrap()
            .iter()
            .map(|c| c.mapped().action_string())
            .collect();
        assert_eq!(
            got,
            [
                "tool:file:write a",
                "tool:file:write .git/hooks/pre-commit",
                "tool:file:delete b",
                "tool:file:write c",
                "tool:file:delete d",
            ]
        );
    }
}
