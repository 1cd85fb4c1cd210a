//! git: which global options, subcommands, options and configuration keys
//! run programs, change configuration or hide what runs, for `git` inside a
//! shell command and for the `git` tool alike.
//!
//! The principle: a plain allow rule allows only what it plainly says. Git
//! can run programs in many ways (aliases, pagers, editors, hooks, ssh
//! commands, credential helpers, diff and merge drivers, transports), so
//! anything that could make it do so is a hazard, and an unknown
//! subcommand (an alias or an external `git-*` program) is one too.

use super::commands::{long_prefix_of, options, short_option_before_value};
use super::{Collector, Hazard};

/// Global options that neither run programs nor change configuration or
/// the repository git works on; the `git` tool's canonical form leaves
/// them out.
const INERT_GLOBAL: &[&str] = &[
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-advice",
    "--no-lazy-fetch",
];

/// Global options that take the next word as their value.
const GLOBAL_WITH_VALUE: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--super-prefix",
    "--list-cmds",
    "--attr-source",
];

/// Subcommands that run programs, talk to helpers or publish by
/// themselves (besides `push`, which profiles judge by name).
const RUNS: &[&str] = &[
    "filter-branch",
    "filter-repo",
    "difftool",
    "mergetool",
    "merge-index",
    "send-email",
    "imap-send",
    "instaweb",
    "web--browse",
    "daemon",
    "credential",
    "credential-cache",
    "credential-cache--daemon",
    "credential-store",
    "upload-pack",
    "receive-pack",
    "upload-archive",
    "shell",
    "remote-ext",
    "remote-fd",
    "http-backend",
    "http-push",
    "http-fetch",
    "send-pack",
    "fetch-pack",
    "svn",
    "p4",
    "cvsserver",
    "cvsimport",
    "cvsexportcommit",
    "archimport",
    "quiltimport",
    "hook",
    "maintenance",
    "subtree",
    "sh-setup",
    "fsmonitor--daemon",
    "gui",
    "citool",
    "scalar",
];

/// Subcommands git has built in (or ships), besides [`RUNS`]: an alias
/// cannot take their names, so they mean what they say.
const KNOWN: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "backfill",
    "bisect",
    "blame",
    "branch",
    "bugreport",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-mailmap",
    "check-ref-format",
    "checkout",
    "checkout-index",
    "cherry",
    "cherry-pick",
    "clean",
    "clone",
    "column",
    "commit",
    "commit-graph",
    "commit-tree",
    "config",
    "count-objects",
    "describe",
    "diagnose",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "fetch",
    "fmt-merge-msg",
    "for-each-ref",
    "for-each-repo",
    "format-patch",
    "fsck",
    "gc",
    "get-tar-commit-id",
    "grep",
    "hash-object",
    "help",
    "index-pack",
    "init",
    "interpret-trailers",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "mailinfo",
    "mailsplit",
    "merge",
    "merge-base",
    "merge-file",
    "merge-tree",
    "mktag",
    "mktree",
    "multi-pack-index",
    "mv",
    "name-rev",
    "notes",
    "pack-objects",
    "pack-refs",
    "prune",
    "prune-packed",
    "pull",
    "push",
    "range-diff",
    "read-tree",
    "rebase",
    "reflog",
    "refs",
    "remote",
    "repack",
    "replace",
    "replay",
    "request-pull",
    "rerere",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "shortlog",
    "show",
    "show-branch",
    "show-index",
    "show-ref",
    "sparse-checkout",
    "stash",
    "status",
    "stripspace",
    "submodule",
    "switch",
    "symbolic-ref",
    "tag",
    "unpack-file",
    "unpack-objects",
    "update-index",
    "update-ref",
    "update-server-info",
    "var",
    "verify-commit",
    "verify-pack",
    "verify-tag",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
];

/// Merge strategies git has built in; any other name runs a
/// `git-merge-<name>` program found on the path.
const STRATEGIES: &[&str] = &["ort", "recursive", "resolve", "octopus", "ours", "subtree"];

/// Whether `git` is one of the tools whose detail this module analyses
/// (the `git` tool: the argument list after `git`).
pub(crate) const TOOL: &str = "git";

/// The index in `lits` of the subcommand (`lits.len()` if there is none),
/// recording a hazard for every global option before it that is not inert.
pub(crate) fn global_options(lits: &[&str], c: &mut Collector) -> usize {
    let mut i = 0;
    while let Some(a) = lits.get(i) {
        if !a.starts_with('-') {
            break;
        }
        if *a == "--version" {
            // `git --version` prints and ignores the rest.
            break;
        }
        if !INERT_GLOBAL.contains(a) {
            // `-c`, `--config-env` (set config: pagers, aliases, hooks),
            // `-C`, `--git-dir`, `--work-tree` (another repository and its
            // configuration), `--exec-path` (where subcommands come from),
            // `-p`/`-P`/`--no-pager`, `--bare`, `--namespace`, help that
            // may start a browser, and anything unknown.
            unsafe_option(c, a);
        }
        if GLOBAL_WITH_VALUE.contains(a) {
            i += 1;
        }
        i += 1;
    }
    i.min(lits.len())
}

fn unsafe_option(c: &mut Collector, option: &str) {
    c.hazard(Hazard::UnsafeOption {
        command: "git".to_owned(),
        option: option.to_owned(),
    });
}

/// git with the literal arguments `lits`: global options, then the
/// subcommand and its options.
pub(super) fn judge(lits: &[&str], c: &mut Collector) {
    let i = global_options(lits, c);
    let Some(sub) = lits.get(i) else {
        return;
    };
    subcommand(sub, lits.get(i + 1..).unwrap_or_default(), true, c);
}

/// Judges a subcommand and its arguments; `transports` is false if the
/// caller knows that no argument holds a `::` (so none is a transport).
pub(crate) fn subcommand(sub: &str, rest: &[&str], transports: bool, c: &mut Collector) {
    if sub == "--version" {
        return;
    }
    if RUNS.contains(&sub) {
        c.hazard(Hazard::RunsCommand {
            command: format!("git {sub}"),
        });
        return;
    }
    if !KNOWN.contains(&sub) {
        c.hazard(Hazard::UnknownSubcommand {
            command: "git".to_owned(),
            subcommand: sub.to_owned(),
        });
        return;
    }
    let bad = |c: &mut Collector, option: &str| {
        c.hazard(Hazard::UnsafeOption {
            command: format!("git {sub}"),
            option: option.to_owned(),
        });
    };
    // `ext::sh -c …` and `fd::` run programs; any `<helper>::<address>`
    // runs `git-remote-<helper>`.
    for a in rest.iter().filter(|_| transports) {
        if is_transport(a) {
            bad(c, a);
        }
    }
    strategy(sub, rest, &bad, c);
    match sub {
        "log" | "show" | "diff" | "whatchanged" | "diff-tree" | "diff-index" | "diff-files"
        | "format-patch" | "range-diff" => {
            for a in options(rest) {
                if long_prefix_of(a, "output", 3) || long_prefix_of(a, "ext-diff", 3) {
                    bad(c, a);
                }
            }
        }
        "grep" => {
            for a in options(rest) {
                if long_prefix_of(a, "open-files-in-pager", 2)
                    || short_option_before_value(a, 'O', "ABCefm")
                {
                    bad(c, a);
                }
            }
        }
        "branch" if !c.git_tool => {
            if let Some(mutation) = git_branch_mutation(rest) {
                // Creating or deleting branches runs no program; only the
                // read-only preset's `git branch` in a shell needs to know.
                c.hazard(Hazard::UnsafeOption {
                    command: "git".to_owned(),
                    option: format!("branch {mutation}"),
                });
            }
        }
        "rebase" => {
            for a in options(rest) {
                // git takes any unambiguous abbreviation (`--ex`).
                if long_prefix_of(a, "exec", 2)
                    || long_prefix_of(a, "interactive", 2)
                    || short_option_before_value(a, 'x', "sXoSC")
                    || short_option_before_value(a, 'i', "sXoSCx")
                {
                    bad(c, a);
                }
            }
        }
        "bisect" if rest.first() == Some(&"run") => bad(c, "run"),
        "submodule" if rest.contains(&"foreach") => bad(c, "foreach"),
        "help" => {
            for a in options(rest) {
                if long_prefix_of(a, "web", 2) || short_option_before_value(a, 'w', "") {
                    bad(c, a);
                }
            }
        }
        "clone" | "fetch" | "pull" | "push" | "ls-remote" | "archive" | "init" | "remote"
        | "submodule" => {
            for a in options(rest) {
                let runs = ["upload-pack", "receive-pack", "exec", "template", "config"]
                    .iter()
                    .any(|o| long_prefix_of(a, o, 2));
                let short = matches!(sub, "clone" | "ls-remote")
                    && (short_option_before_value(a, 'u', "obcj")
                        || short_option_before_value(a, 'c', "obuj"));
                if runs || short {
                    bad(c, a);
                }
            }
        }
        "config" => config(rest, &bad, c),
        _ => {}
    }
}

/// `-s`/`--strategy` naming a strategy git does not have runs
/// `git-merge-<name>` from the path.
fn strategy(sub: &str, rest: &[&str], bad: &dyn Fn(&mut Collector, &str), c: &mut Collector) {
    if !matches!(sub, "merge" | "pull" | "rebase" | "cherry-pick" | "revert") {
        return;
    }
    let mut i = 0;
    while let Some(a) = rest.get(i) {
        i += 1;
        if *a == "--" {
            break;
        }
        let value = if let Some(v) = a.strip_prefix("--strategy=") {
            Some(v)
        } else if *a == "--strategy" || *a == "-s" {
            i += 1;
            rest.get(i - 1).copied()
        } else {
            a.strip_prefix("-s").filter(|v| !v.is_empty())
        };
        if let Some(v) = value
            && !STRATEGIES.contains(&v)
        {
            bad(c, a);
        }
        if value.is_none()
            && a.starts_with("--str")
            && !a.starts_with("--strategy-option")
            && "--strategy".starts_with(a.split('=').next().unwrap_or(a))
        {
            bad(c, a);
        }
    }
}

/// `ext::…`, `fd::…` or any `<helper>::<address>` URL.
///
/// Runs on every argument of every git command, so it scans bytes (a
/// `str::split_once("::")` sets up a substring searcher per call, which
/// made long argument lists cost about 1,000 instructions a word).
fn is_transport(arg: &str) -> bool {
    let bytes = arg.as_bytes();
    if !bytes.contains(&b':') {
        return false;
    }
    let value = match bytes.iter().position(|&b| b == b'=') {
        Some(eq) => bytes.get(eq + 1..).unwrap_or_default(),
        None => bytes,
    };
    let Some(colons) = value.windows(2).position(|w| w == b"::") else {
        return false;
    };
    let helper = value.get(..colons).unwrap_or_default();
    !helper.is_empty()
        && helper
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'+'))
}

/// Configuration keys that can be written without letting git run a
/// program, reach another repository or change what a command means:
/// whole sections, then single keys (lowercase; a subsection in between is
/// not allowed for these).
const INERT_SECTIONS: &[&str] = &["color", "advice", "log", "status", "column"];
const INERT_KEYS: &[&str] = &[
    "user.name",
    "user.email",
    "core.autocrlf",
    "core.eol",
    "core.filemode",
    "core.ignorecase",
    "core.quotepath",
    "core.safecrlf",
    "init.defaultbranch",
    "pull.rebase",
    "pull.ff",
    "merge.ff",
    "push.default",
    "push.autosetupremote",
    "fetch.prune",
    "diff.renames",
    "diff.algorithm",
    "diff.colormoved",
    "rerere.enabled",
    "commit.verbose",
    "branch.autosetuprebase",
];

/// Whether writing `key` is harmless.
fn inert_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    let Some((section, name)) = lower.split_once('.') else {
        return false;
    };
    if name.contains('.') {
        // `section.subsection.name`: drivers, remotes, branches, aliases…
        return false;
    }
    INERT_SECTIONS.contains(&section) || INERT_KEYS.contains(&lower.as_str())
}

/// `git config`: reads pass; a write (old or new syntax) passes only for
/// an inert key of the repository's own configuration.
fn config(rest: &[&str], bad: &dyn Fn(&mut Collector, &str), c: &mut Collector) {
    const WITH_VALUE: &[&str] = &[
        "-f",
        "--file",
        "--blob",
        "--type",
        "--default",
        "--comment",
        "--value",
    ];
    const READS: &[&str] = &[
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--get-color",
        "--get-colorbool",
        "-l",
        "--list",
        "--show-origin",
        "--show-scope",
        "--name-only",
    ];
    const READ_VERBS: &[&str] = &["get", "list"];
    const WRITE_VERBS: &[&str] = &["set", "unset", "rename-section", "remove-section"];
    let mut positional = Vec::new();
    let mut read = false;
    let mut file = None;
    let mut i = 0;
    while let Some(a) = rest.get(i) {
        i += 1;
        if !a.starts_with('-') || *a == "-" {
            positional.push(*a);
            continue;
        }
        if matches!(*a, "-e" | "--edit") || a.starts_with("--rename-section") {
            bad(c, a);
            return;
        }
        if READS
            .iter()
            .any(|r| a == r || a.starts_with(&format!("{r}=")))
        {
            read = true;
        }
        if matches!(*a, "-f" | "--file") || a.starts_with("--file=") {
            file = Some(*a);
        }
        if WITH_VALUE.contains(a) {
            i += 1;
        }
    }
    let (verb, args) = match positional.split_first() {
        Some((v, args)) if READ_VERBS.contains(v) || WRITE_VERBS.contains(v) || *v == "edit" => {
            (Some(*v), args)
        }
        _ => (None, positional.as_slice()),
    };
    match verb {
        Some("edit") => {
            bad(c, "edit");
            return;
        }
        Some("rename-section") => {
            bad(c, "rename-section");
            return;
        }
        Some(v) if READ_VERBS.contains(&v) => read = true,
        Some(_) => read = false,
        // `git config key` reads, `git config key value` writes.
        None => read = read || args.len() < 2,
    }
    if read {
        return;
    }
    if let Some(file) = file {
        bad(c, file);
        return;
    }
    if let Some(key) = args.first()
        && !inert_key(key)
    {
        bad(c, key);
    }
}

/// The first argument that makes `git branch` do anything but list, or
/// `None` if it only lists. Unknown options count as mutations.
fn git_branch_mutation<'a>(args: &[&'a str]) -> Option<&'a str> {
    const FLAGS: &[&str] = &[
        "-a",
        "--all",
        "-r",
        "--remotes",
        "-l",
        "--list",
        "-v",
        "-vv",
        "--verbose",
        "-i",
        "--ignore-case",
        "--show-current",
        "--color",
        "--no-color",
        "--column",
        "--no-column",
        "--omit-empty",
        "-q",
        "--quiet",
        "--abbrev",
        "--no-abbrev",
    ];
    const VALUE_REQUIRED: &[&str] = &["--sort", "--format", "--points-at"];
    const VALUE_OPTIONAL: &[&str] = &["--contains", "--no-contains", "--merged", "--no-merged"];
    const WITH_EQUALS: &[&str] = &[
        "--color=",
        "--column=",
        "--abbrev=",
        "--sort=",
        "--format=",
        "--points-at=",
        "--contains=",
        "--no-contains=",
        "--merged=",
        "--no-merged=",
    ];
    let mut list_mode = false;
    let mut positional = None;
    let mut i = 0;
    let mut after_dashes = false;
    while let Some(&a) = args.get(i) {
        i += 1;
        if after_dashes || !a.starts_with('-') || a == "-" {
            positional = positional.or(Some(a));
            continue;
        }
        if a == "--" {
            after_dashes = true;
        } else if a == "-l" || a == "--list" {
            list_mode = true;
        } else if FLAGS.contains(&a) || WITH_EQUALS.iter().any(|p| a.starts_with(p)) {
        } else if VALUE_REQUIRED.contains(&a) {
            i += 1;
        } else if VALUE_OPTIONAL.contains(&a) {
            if args.get(i).is_some_and(|next| !next.starts_with('-')) {
                i += 1;
            }
        } else if !a.starts_with("--")
            && a.len() > 1
            && a.chars().skip(1).all(|ch| "arlviq".contains(ch))
        {
            list_mode |= a.contains('l');
        } else {
            return Some(a);
        }
    }
    // Without `--list`, a name creates a branch.
    if list_mode { None } else { positional }
}

/// For a `git` tool detail that is its own canonical form (a subcommand
/// and arguments of the fast path's alphabet, one space apart), the first
/// hazard [`super::analyze`] would report, without building the analysis;
/// `None` if `detail` is not of that form.
pub(crate) fn simple_hazard(detail: &str) -> Option<Option<Hazard>> {
    super::scan::single_spaced(detail.as_bytes())?;
    if detail.starts_with('-') {
        return None;
    }
    // The words are one space apart: cut at each space, found eight bytes
    // at a time (a `split(' ')` or `memchr` call per word cost more than
    // the rest of the analysis on long lines). The detail is of the ASCII
    // alphabet, so every index is a character boundary.
    let mut lits: Vec<&str> = Vec::with_capacity(detail.len() / 8 + 1);
    let mut start = 0;
    super::scan::for_each_space(detail.as_bytes(), |at| {
        lits.push(detail.get(start..at).unwrap_or_default());
        start = at + 1;
    });
    lits.push(detail.get(start..)?);
    let transports = memchr::memmem::find(detail.as_bytes(), b"::").is_some();
    let (sub, rest) = lits.split_first()?;
    let mut c = Collector {
        git_tool: true,
        ..Collector::default()
    };
    subcommand(sub, rest, transports, &mut c);
    // What a runner runs is for the full analysis to show deny patterns.
    if c.runs_its_arguments(TOOL) {
        return None;
    }
    Some(c.hazards.into_iter().next())
}

#[cfg(test)]
mod tests;
