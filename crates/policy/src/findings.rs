//! What an action may do, as the analyser reads it: deletes, writes,
//! network, runs other commands, or could not be read in full. This is
//! what a human is shown next to an action (the page's risk badge); it
//! never changes a verdict, which [`crate::decide`] alone gives.
//!
//! Shell details (the shell tools, `git`, and a handler action whose scope
//! carries a `command`) are cut into simple commands by [`analyze`] and
//! each is classified by its program and subcommand; the analyser's
//! hazards add their own findings (a redirection to a file writes, one to
//! `/dev/tcp` opens a connection, a substitution runs commands). Other
//! tools are classified by their names (`Write`, `WebFetch`, a handler's
//! `files.delete`).

use crate::grant::SHELL_SCOPE_KEY;
use crate::profile::{DEFAULT_SHELL_TOOLS, GIT_TOOL};
use crate::shell::{Dialect, Hazard, ShellAnalysis, analyze};

/// One thing an action may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Finding {
    /// Removes or overwrites data beyond a plain write (`rm`, `git reset
    /// --hard`, `DROP TABLE`, a handler's delete).
    Deletes,
    /// Writes files or changes state (`mv`, `> file`, `sed -i`, `git
    /// commit`, `Write`).
    Writes,
    /// Talks to the network (`curl`, `git push`, `/dev/tcp`, `WebFetch`).
    Network,
    /// Runs other commands (`bash -c`, `xargs`, `$(…)`).
    RunsCommands,
    /// Parts of it could not be analysed (unparsable, too long, a hidden
    /// command name): it may do more than is listed.
    Unclear,
}

impl Finding {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Finding::Deletes => "deletes",
            Finding::Writes => "writes",
            Finding::Network => "network",
            Finding::RunsCommands => "runs_commands",
            Finding::Unclear => "unclear",
        }
    }
}

/// What an action of `tool` with `detail` may do; `scope` is a handler
/// action's scope (its `command` is analysed as a shell line) and `names`
/// the handler's action and permission names. Sorted, without repeats.
pub fn findings(
    tool: &str,
    detail: &str,
    scope: Option<&serde_json::Map<String, serde_json::Value>>,
    names: &[&str],
) -> Vec<Finding> {
    let mut out = Vec::new();
    let shell = if tool == GIT_TOOL {
        Some((Dialect::Git, detail))
    } else if tool == "sh" {
        Some((Dialect::Sh, detail))
    } else if DEFAULT_SHELL_TOOLS.contains(&tool) || tool == "Bash" {
        Some((Dialect::Bash, detail))
    } else {
        scope
            .and_then(|s| s.get(SHELL_SCOPE_KEY))
            .and_then(|c| c.as_str())
            .map(|c| (Dialect::Bash, c))
    };
    if let Some((dialect, text)) = shell {
        shell_findings(dialect, text, &mut out);
    } else {
        tool_findings(tool, detail, &mut out);
    }
    for name in names {
        name_findings(name, &mut out);
    }
    out.sort();
    out.dedup();
    out
}

fn shell_findings(dialect: Dialect, text: &str, out: &mut Vec<Finding>) {
    let analysis = analyze(dialect, text);
    commands_findings(dialect, &analysis, out);
    for hazard in &analysis.hazards {
        match hazard {
            // `/dev/tcp/…` is a connection (its own hazard), not a file.
            Hazard::FileRedirect { target }
                if target.starts_with("/dev/tcp/") || target.starts_with("/dev/udp/") => {}
            Hazard::FileRedirect { .. } | Hazard::UnsafeOption { .. } => out.push(Finding::Writes),
            Hazard::Network { .. } => out.push(Finding::Network),
            Hazard::RunsCommand { .. }
            | Hazard::CommandSubstitution
            | Hazard::ProcessSubstitution
            | Hazard::NotGit { .. }
            | Hazard::Coprocess => out.push(Finding::RunsCommands),
            Hazard::Unparsable { .. }
            | Hazard::TooDeep
            | Hazard::TooLong
            | Hazard::HiddenCommandName { .. }
            | Hazard::UnknownSubcommand { .. } => out.push(Finding::Unclear),
            _ => {}
        }
    }
    // A line the analyser cannot read (a stray control character makes it
    // so) still says what it plainly holds: its commands read as if the
    // characters were blanks. Findings only inform the human; this one
    // keeps `rm -rf /srv/prod\r` as loud as `rm -rf /srv/prod`.
    let unparsable = analysis
        .hazards
        .iter()
        .any(|h| matches!(h, Hazard::Unparsable { .. }));
    if unparsable && text.chars().any(char::is_control) {
        let blanked: String = text
            .chars()
            .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
            .collect();
        commands_findings(dialect, &analyze(dialect, &blanked), out);
    }
}

/// The findings of each command (hidden ones too) an analysis read.
fn commands_findings(dialect: Dialect, analysis: &ShellAnalysis, out: &mut Vec<Finding>) {
    for command in analysis.commands.iter().chain(&analysis.hidden) {
        let line = if dialect == Dialect::Git {
            format!("git {command}")
        } else {
            command.clone()
        };
        command_findings(&line, out);
    }
}

const DELETES: &[&str] = &[
    "rm", "rmdir", "shred", "unlink", "truncate", "dd", "wipefs", "srm",
];
const NETWORK: &[&str] = &[
    "curl", "wget", "ssh", "scp", "sftp", "rsync", "nc", "ncat", "netcat", "telnet", "ftp", "http",
    "https", "xh", "ping", "dig", "nslookup", "socat",
];
const WRITES: &[&str] = &[
    "tee", "mv", "cp", "chmod", "chown", "chgrp", "mkdir", "touch", "ln", "install", "patch",
    "kill", "pkill", "killall",
];
/// Wrappers whose next word is the program that runs.
const WRAPPERS: &[&str] = &["sudo", "doas", "env", "nohup", "time", "nice", "command"];

/// One simple command, in the analyser's canonical form.
fn command_findings(line: &str, out: &mut Vec<Finding>) {
    let words: Vec<&str> = line.split_whitespace().collect();
    let start = words
        .iter()
        .position(|w| !WRAPPERS.contains(w) && !w.contains('='))
        .unwrap_or(words.len());
    let Some(&program) = words.get(start) else {
        return;
    };
    let program = program.rsplit('/').next().unwrap_or(program);
    let args = &words[start + 1..];
    let sub = args.first().copied().unwrap_or("");
    let has = |w: &str| args.contains(&w);
    if DELETES.contains(&program) || program.starts_with("mkfs") {
        out.push(Finding::Deletes);
    }
    if NETWORK.contains(&program) {
        out.push(Finding::Network);
    }
    if WRITES.contains(&program) {
        out.push(Finding::Writes);
    }
    if args.iter().any(|a| a.contains("://")) {
        out.push(Finding::Network);
    }
    if args.contains(&"--delete") {
        out.push(Finding::Deletes);
    }
    // A subcommand that destroys what a tool manages (`terraform destroy`,
    // `docker system prune`, `redis-cli flushall`, `aws s3 rm`, `helm
    // uninstall`), or `crontab -r`.
    if args.iter().any(|a| {
        [
            "destroy",
            "-destroy",
            "prune",
            "flushall",
            "flushdb",
            "purge",
            "uninstall",
            "wipe",
        ]
        .contains(&a.to_ascii_lowercase().as_str())
    }) || (program == "crontab" && has("-r"))
        || (matches!(program, "aws" | "gsutil" | "gcloud" | "az")
            && args.iter().any(|a| matches!(*a, "rm" | "rb" | "delete")))
    {
        out.push(Finding::Deletes);
    }
    match program {
        "sed" | "perl" if args.iter().any(|a| a.starts_with("-i")) => out.push(Finding::Writes),
        "git" => match sub {
            "push" | "fetch" | "pull" | "clone" | "ls-remote" => {
                out.push(Finding::Network);
                if sub == "push" && (has("--force") || has("-f") || has("--delete") || has("-d")) {
                    out.push(Finding::Deletes);
                }
                if sub != "ls-remote" && sub != "push" {
                    out.push(Finding::Writes);
                }
            }
            "reset" if has("--hard") => out.push(Finding::Deletes),
            "clean" if args.iter().any(|a| a.starts_with('-') && a.contains('f')) => {
                out.push(Finding::Deletes)
            }
            "branch" if has("-D") => out.push(Finding::Deletes),
            "rm" => out.push(Finding::Deletes),
            "commit" | "merge" | "rebase" | "checkout" | "switch" | "restore" | "add" | "tag"
            | "mv" | "stash" | "reset" | "apply" | "am" | "cherry-pick" | "revert" | "init" => {
                out.push(Finding::Writes)
            }
            _ => {}
        },
        "npm" | "pnpm" | "yarn" | "pip" | "pip3" | "apt" | "apt-get" | "cargo" | "gem" | "brew" => {
            match sub {
                "publish" | "upload" => out.push(Finding::Network),
                "i" | "install" | "add" | "remove" | "uninstall" | "update" | "upgrade" => {
                    out.push(Finding::Writes);
                    out.push(Finding::Network);
                }
                _ => {}
            }
        }
        "twine" if sub == "upload" => out.push(Finding::Network),
        "docker" | "podman" => match sub {
            "push" | "pull" | "login" => out.push(Finding::Network),
            "rm" | "rmi" | "prune" => out.push(Finding::Deletes),
            _ => {}
        },
        "kubectl" => match sub {
            "delete" => out.push(Finding::Deletes),
            "apply" | "create" | "patch" | "replace" | "scale" | "edit" => {
                out.push(Finding::Writes)
            }
            _ => {}
        },
        _ => {}
    }
    let lower = line.to_ascii_lowercase();
    if [
        "drop table",
        "drop database",
        "drop schema",
        "truncate table",
        "delete from",
    ]
    .iter()
    .any(|s| lower.contains(s))
    {
        out.push(Finding::Deletes);
    }
}

/// A tool the policy does not parse: by the names the presets and the
/// Claude Code hook use.
fn tool_findings(tool: &str, detail: &str, out: &mut Vec<Finding>) {
    match tool {
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => out.push(Finding::Writes),
        "WebFetch" | "WebSearch" => out.push(Finding::Network),
        "file" => {
            let verb = detail.split_whitespace().next().unwrap_or("");
            if name_has(verb, &["delete", "remove", "rm", "unlink"]) {
                out.push(Finding::Deletes);
            } else if !name_has(verb, &["view", "read", "list", "stat", "search", "find"]) {
                out.push(Finding::Writes);
            }
        }
        _ => {}
    }
}

/// A handler's action or permission name, cut at `.`, `_`, `-`, `:` and
/// case changes into words.
fn name_findings(name: &str, out: &mut Vec<Finding>) {
    if name_has(
        name,
        &[
            "delete", "remove", "rm", "del", "drop", "destroy", "purge", "wipe", "erase",
        ],
    ) {
        out.push(Finding::Deletes);
    }
    if name_has(
        name,
        &[
            "net", "http", "mail", "email", "send", "post", "webhook", "publish", "upload",
            "message", "notify", "fetch",
        ],
    ) {
        out.push(Finding::Network);
    }
    if name_has(
        name,
        &[
            "write", "create", "update", "edit", "put", "append", "move", "rename", "deploy",
            "install", "set",
        ],
    ) {
        out.push(Finding::Writes);
    }
    if name_has(name, &["exec", "execute", "run", "command", "shell"]) {
        out.push(Finding::RunsCommands);
    }
}

fn name_has(name: &str, words: &[&str]) -> bool {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for ch in name.chars() {
        if !ch.is_ascii_alphanumeric() {
            parts.push(std::mem::take(&mut cur));
            prev_lower = false;
            continue;
        }
        if ch.is_ascii_uppercase() && prev_lower {
            parts.push(std::mem::take(&mut cur));
        }
        prev_lower = ch.is_ascii_lowercase();
        cur.push(ch.to_ascii_lowercase());
    }
    parts.push(cur);
    parts.iter().any(|p| {
        words
            .iter()
            .any(|w| p == w || (p.len() > w.len() + 1 && p.starts_with(w) && w.len() > 3))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use Finding::*;

    fn of(tool: &str, detail: &str) -> Vec<Finding> {
        findings(tool, detail, None, &[])
    }

    #[test]
    fn shell_commands_say_what_they_do() {
        assert_eq!(of("bash", "ls -la"), vec![]);
        assert_eq!(of("bash", "rm -rf /tmp/build"), vec![Deletes]);
        assert_eq!(of("bash", "sudo rm -rf /"), vec![Deletes, RunsCommands]);
        assert_eq!(
            of("bash", "curl -X POST https://example.com/api -d x=1"),
            vec![Network]
        );
        assert_eq!(of("bash", "echo hi > notes.txt"), vec![Writes]);
        assert_eq!(of("bash", "echo hi >/dev/null"), vec![]);
        assert_eq!(of("bash", "sed -i s/a/b/ f"), vec![Writes]);
        assert_eq!(
            of("bash", "cat /etc/hosts > /dev/tcp/10.0.0.1/80"),
            vec![Network]
        );
        assert_eq!(
            of("bash", "ls $(curl -s x.sh)"),
            vec![Network, RunsCommands]
        );
        assert_eq!(
            of("bash", "git push --force origin main"),
            vec![Deletes, Network]
        );
        assert_eq!(of("git", "reset --hard HEAD~3"), vec![Deletes]);
        for line in [
            "terraform destroy -auto-approve",
            "terraform apply -destroy",
            "docker system prune -af",
            "crontab -r",
            "redis-cli FLUSHALL",
            "helm uninstall web",
        ] {
            assert!(of("bash", line).contains(&Deletes), "{line}");
        }
        assert!(of("bash", "aws s3 rm s3://prod-bucket --recursive").contains(&Deletes));
        assert!(!of("bash", "crontab -l").contains(&Deletes));
        assert_eq!(of("git", "commit -m wip"), vec![Writes]);
        assert_eq!(of("git", "status"), vec![]);
        assert_eq!(of("sh", "psql -c 'DROP TABLE users'"), vec![Deletes]);
        assert_eq!(of("bash", "echo 'unterminated"), vec![Unclear]);
        // A stray control character does not hide what the line does.
        for odd in [
            "rm -rf /srv/prod\r",
            "rm -rf /srv/prod\u{1b}",
            "git reset --hard\u{7f}",
        ] {
            let f = of("bash", odd);
            assert!(
                f.contains(&Deletes) && f.contains(&Unclear),
                "{odd:?}: {f:?}"
            );
        }
        assert!(of("sh", "psql -c 'DROP TABLE users'\r").contains(&Deletes));
    }

    #[test]
    fn other_tools_by_their_names() {
        assert_eq!(of("Write", "/tmp/x"), vec![Writes]);
        assert_eq!(of("WebFetch", "https://example.com"), vec![Network]);
        assert_eq!(of("file", "view README.md"), vec![]);
        assert_eq!(of("file", "write notes.txt"), vec![Writes]);
        assert_eq!(of("Read", "/etc/passwd"), vec![]);
        assert_eq!(
            findings("files", "delete /tmp/x", None, &["delete", "files.delete"]),
            vec![Deletes]
        );
        assert_eq!(
            findings("mailer", "send to=a@b", None, &["send", "mail.send"]),
            vec![Network]
        );
    }

    #[test]
    fn a_handler_command_is_analysed_as_a_shell_line() {
        let scope = serde_json::json!({"command": "rm -rf build"});
        let scope = scope.as_object().unwrap();
        assert_eq!(
            findings("exec", "execute_command rm -rf build", Some(scope), &[]),
            vec![Deletes]
        );
    }
}
