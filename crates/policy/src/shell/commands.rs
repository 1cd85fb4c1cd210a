//! Command-specific knowledge: which commands run other commands or change
//! the shell, and which options turn read-only tools into writers.
//!
//! This is deliberately about forms, not names: whether `git` or `sed` is
//! allowed at all is the profile's business; this module only makes sure
//! that an allowed name cannot be used to write files or run programs.

use super::words::WordInfo;
use super::{Collector, Hazard};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

/// Commands whose options cannot write files or run programs, so arguments
/// known only at run time (`echo $HOME`) are harmless to them.
const FLAG_SAFE: &[&str] = &[
    "echo", "ls", "cat", "head", "tail", "pwd", "which", "wc", "true", "false", "test", "[",
    "basename", "dirname", "whoami", "id", "uname", "type", "stat", "du", "df", "grep", "egrep",
    "fgrep", "tr", "cut", "nl", "rev",
];

/// Commands whose job is to run another command, or code given inline.
const RUNNERS: &[&str] = &[
    "eval",
    "exec",
    "source",
    ".",
    "builtin",
    "sudo",
    "doas",
    "su",
    "runuser",
    "pkexec",
    "nohup",
    "timeout",
    "nice",
    "ionice",
    "stdbuf",
    "setsid",
    "chroot",
    "unshare",
    "nsenter",
    "parallel",
    "watch",
    "strace",
    "ltrace",
    "script",
    "flock",
    "taskset",
    "chrt",
    "busybox",
    "trap",
    "fc",
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "ash",
    "fish",
    "csh",
    "tcsh",
    "yash",
    "posh",
    "rbash",
    "pwsh",
    "powershell",
];

/// Builtins that change variables, options, aliases or key bindings.
const STATE: &[&str] = &[
    "export",
    "declare",
    "typeset",
    "local",
    "alias",
    "readonly",
    "unset",
    "read",
    "mapfile",
    "readarray",
    "bind",
    "complete",
    "compgen",
    "getopts",
    "enable",
];

/// Builtins that only print when given no arguments.
const STATE_WITH_ARGS: &[&str] = &["set", "shopt", "hash"];

/// Interpreters that run inline code with `-c`/`-e` or read a program from stdin.
const INTERPRETERS: &[&str] = &[
    "python",
    "python2",
    "python3",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "php",
    "lua",
    "luajit",
    "Rscript",
    "osascript",
];

/// Commands this module inspects option by option; an unquoted glob in
/// their arguments could expand into one of those options.
const CHECKED: &[&str] = &[
    "git", "find", "sed", "sort", "tee", "rg", "awk", "gawk", "mawk", "nawk", "less", "more",
    "most", "pg", "man", "tar", "xargs", "env", "command", "printf",
];

/// Which of the lists above a command name is in, as bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Kind(u8);

impl Kind {
    const RUNNER: u8 = 1;
    const STATE: u8 = 1 << 1;
    const STATE_WITH_ARGS: u8 = 1 << 2;
    const FLAG_SAFE: u8 = 1 << 3;
    const CHECKED: u8 = 1 << 4;
    const INTERPRETER: u8 = 1 << 5;

    fn is(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    /// Looks `name` up in all the lists at once: one hash of a short
    /// string instead of a comparison with each of about 150 names.
    fn of(name: &str) -> Kind {
        static KINDS: OnceLock<HashMap<&'static str, u8, BuildHasherDefault<Fnv>>> =
            OnceLock::new();
        let kinds = KINDS.get_or_init(|| {
            let mut kinds = HashMap::default();
            for (list, bit) in [
                (RUNNERS, Kind::RUNNER),
                (STATE, Kind::STATE),
                (STATE_WITH_ARGS, Kind::STATE_WITH_ARGS),
                (FLAG_SAFE, Kind::FLAG_SAFE),
                (CHECKED, Kind::CHECKED),
                (INTERPRETERS, Kind::INTERPRETER),
            ] {
                for name in list {
                    *kinds.entry(*name).or_insert(0) |= bit;
                }
            }
            kinds
        });
        Kind(kinds.get(name).copied().unwrap_or(0))
    }
}

/// FNV-1a: command names are short and not chosen to collide with each
/// other (a collision only costs a comparison), so a simple hash is enough.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The hazards that follow from the name alone (and whether there are
/// arguments); false if one was recorded and the command needs no more
/// looking at.
fn judge_name(name: &str, kind: Kind, has_args: bool, c: &mut Collector) -> bool {
    if kind.is(Kind::RUNNER) {
        c.hazard(Hazard::RunsCommand {
            command: name.to_owned(),
        });
        return false;
    }
    if kind.is(Kind::STATE) || (kind.is(Kind::STATE_WITH_ARGS) && has_args) {
        c.hazard(Hazard::ChangesShellState {
            command: name.to_owned(),
        });
        return false;
    }
    if name == "let" {
        c.hazard(Hazard::Arithmetic);
        return false;
    }
    true
}

/// Judges one simple command whose name is plain and whose arguments are
/// all plain literals (no globs, nothing known only at run time): what
/// [`judge`] does, without building [`WordInfo`]s.
pub(crate) fn judge_literal(name: &str, lits: &[&str], c: &mut Collector) {
    let kind = Kind::of(name);
    if judge_name(name, kind, !lits.is_empty(), c)
        && (kind.is(Kind::CHECKED) || kind.is(Kind::INTERPRETER))
    {
        inspect(name, kind, lits, c);
    }
}

/// Judges one simple command whose name is plain.
pub(crate) fn judge(name: &str, args: &[WordInfo<'_>], c: &mut Collector) {
    let kind = Kind::of(name);
    if !judge_name(name, kind, !args.is_empty(), c) {
        return;
    }
    if !kind.is(Kind::FLAG_SAFE)
        && let Some(arg) = args.iter().find(|a| a.literal.is_none())
    {
        c.hazard(Hazard::DynamicArgument {
            command: name.to_owned(),
            word: arg.raw.to_owned(),
        });
    }
    if kind.is(Kind::CHECKED) {
        let mut options = args
            .iter()
            .take_while(|a| a.literal.as_deref() != Some("--"));
        if let Some(arg) = options.find(|a| a.glob) {
            c.hazard(Hazard::GlobArgument {
                command: name.to_owned(),
                word: arg.raw.to_owned(),
            });
        }
    }
    // Every command `inspect` looks at is in one of these lists.
    if !kind.is(Kind::CHECKED) && !kind.is(Kind::INTERPRETER) {
        return;
    }
    // From here on only literal arguments matter; dynamic ones were flagged.
    let lits: Vec<&str> = args.iter().filter_map(|a| a.literal.as_deref()).collect();
    inspect(name, kind, &lits, c);
}

/// The option-by-option checks of the commands in `CHECKED` and
/// `INTERPRETERS`, on their literal arguments.
fn inspect(name: &str, kind: Kind, lits: &[&str], c: &mut Collector) {
    let runs = |c: &mut Collector| {
        c.hazard(Hazard::RunsCommand {
            command: name.to_owned(),
        });
    };
    let unsafe_option = |c: &mut Collector, option: &str| {
        c.hazard(Hazard::UnsafeOption {
            command: name.to_owned(),
            option: option.to_owned(),
        });
    };
    match name {
        // `command -v x` / `command -V x` only look a name up.
        "command" if !lits.is_empty() && !matches!(lits.first(), Some(&"-v" | &"-V")) => runs(c),
        "env" if !lits.is_empty() => runs(c),
        "xargs" if xargs_runs_command(lits) => runs(c),
        "printf" => {
            if let Some(opt) = lits
                .iter()
                .take_while(|a| a.starts_with('-'))
                .find(|a| a.contains('v'))
            {
                c.hazard(Hazard::ChangesShellState {
                    command: format!("printf {opt}"),
                });
            }
        }
        _ if kind.is(Kind::INTERPRETER) => {
            let inline = lits.iter().any(|a| {
                matches!(*a, "--eval" | "--print" | "--command" | "-")
                    || (a.starts_with('-')
                        && !a.starts_with("--")
                        && a.contains(['c', 'e', 'E', 'r']))
            });
            let script = lits.iter().any(|a| !a.starts_with('-'));
            if inline || !script {
                runs(c);
            }
        }
        "git" => super::git::judge(lits, c),
        "find" => {
            for a in lits {
                match *a {
                    "-exec" | "-execdir" | "-ok" | "-okdir" => runs(c),
                    "-delete" | "-fprint" | "-fprint0" | "-fprintf" | "-fls" => unsafe_option(c, a),
                    _ => {}
                }
            }
        }
        "sed" => sed(lits, &unsafe_option, c),
        "sort" => {
            for a in options(lits) {
                let long_hit =
                    long_prefix_of(a, "output", 2) || long_prefix_of(a, "compress-program", 3);
                if long_hit || short_option_before_value(a, 'o', "ktSTo") {
                    unsafe_option(c, a);
                }
            }
        }
        "tee" => {
            for a in lits.iter().filter(|a| !a.starts_with('-') || **a == "-") {
                if !matches!(*a, "/dev/null" | "/dev/stdout" | "/dev/stderr") {
                    unsafe_option(c, a);
                }
            }
        }
        "rg" => {
            for a in options(lits) {
                if *a == "--pre" || a.starts_with("--pre=") {
                    unsafe_option(c, a);
                }
            }
        }
        "awk" | "gawk" | "mawk" | "nawk" => {
            for a in lits {
                let risky = ["system", "|", ">", "getline", "@load"]
                    .iter()
                    .any(|s| a.contains(s));
                if risky
                    || *a == "-f"
                    || a.starts_with("--file")
                    || a.starts_with("-f") && a.len() > 2
                {
                    unsafe_option(c, a);
                }
            }
        }
        "less" | "more" | "most" | "pg" => {
            for a in lits {
                if a.starts_with('+') || a.contains('!') {
                    unsafe_option(c, a);
                }
            }
        }
        "man" => {
            for a in options(lits) {
                let short = !a.starts_with("--") && a.contains(['P', 'H']);
                if short || long_prefix_of(a, "pager", 2) || long_prefix_of(a, "html", 2) {
                    unsafe_option(c, a);
                }
            }
        }
        "tar" => {
            for a in lits {
                let long = [
                    "to-command",
                    "checkpoint-action",
                    "use-compress-program",
                    "rsh-command",
                    "info-script",
                    "new-volume-script",
                ]
                .iter()
                .any(|o| long_prefix_of(a, o, 4));
                let short = a.starts_with('-') && !a.starts_with("--") && a.contains(['I', 'F']);
                if long || short {
                    unsafe_option(c, a);
                }
            }
        }
        _ => {}
    }
}

/// Arguments before `--` that look like options.
pub(super) fn options<'a>(lits: &'a [&'a str]) -> impl Iterator<Item = &'a &'a str> {
    lits.iter()
        .take_while(|a| **a != "--")
        .filter(|a| a.starts_with('-') && a.len() > 1)
}

/// `--name[=value]` where `name` is at least `min` characters and a prefix
/// of `long` (GNU tools accept unambiguous abbreviations).
pub(super) fn long_prefix_of(arg: &str, long: &str, min: usize) -> bool {
    arg.strip_prefix("--")
        .map(|rest| rest.split('=').next().unwrap_or(rest))
        .is_some_and(|name| name.len() >= min && long.starts_with(name))
}

/// Whether the short-option cluster `arg` (`-no`, `-nofile`) uses `flag`,
/// scanning letters until one that takes a value (`takes_value`) ends the
/// cluster.
pub(super) fn short_option_before_value(arg: &str, flag: char, takes_value: &str) -> bool {
    let Some(cluster) = arg.strip_prefix('-').filter(|r| !r.starts_with('-')) else {
        return false;
    };
    for ch in cluster.chars() {
        if ch == flag {
            return true;
        }
        if takes_value.contains(ch) {
            return false;
        }
    }
    false
}

fn sed(lits: &[&str], unsafe_option: &dyn Fn(&mut Collector, &str), c: &mut Collector) {
    let mut expect_value = false;
    for a in lits {
        if expect_value {
            expect_value = false;
            if sed_script_writes_or_runs(a) {
                unsafe_option(c, a);
            }
            continue;
        }
        if long_prefix_of(a, "in-place", 2) || long_prefix_of(a, "file", 2) {
            unsafe_option(c, a);
        } else if a.starts_with('-') && !a.starts_with("--") && a.len() > 1 {
            // `-i` edits in place; `-f` reads a script the policy cannot see.
            if short_option_before_value(a, 'i', "efl") || short_option_before_value(a, 'f', "el") {
                unsafe_option(c, a);
            }
            expect_value = a.ends_with('e') || a.ends_with('l');
        } else if sed_script_writes_or_runs(a) {
            unsafe_option(c, a);
        }
    }
}

/// A deliberately rough look for sed's `w`/`W` (write), `e` (execute)
/// commands and the `w`/`e` flags of `s`. False alarms only cost a question.
fn sed_script_writes_or_runs(script: &str) -> bool {
    let bytes = script.as_bytes();
    // Commands: at the start or after `;`, `{`, `}`, newline, an address or `!`.
    let mut at_command = true;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b';' | b'{' | b'}' | b'\n' => at_command = true,
            b' ' | b'\t' | b'!' | b',' | b'$' | b'0'..=b'9' => {}
            // A `/regex/` address: skip it, a command follows.
            b'/' if at_command => {
                i += 1;
                while let Some(&r) = bytes.get(i) {
                    match r {
                        b'\\' => i += 1,
                        b'/' => break,
                        _ => {}
                    }
                    i += 1;
                }
            }
            b'e' | b'w' | b'W' if at_command => return true,
            b's' if at_command => {
                let flags = substitution_flags(bytes.get(i + 1..).unwrap_or_default());
                if flags.is_some_and(|f| f.contains(['e', 'w'])) {
                    return true;
                }
                at_command = false;
            }
            _ => at_command = false,
        }
        i += 1;
    }
    false
}

/// The flags of an `s` command given the text right after the `s`.
fn substitution_flags(rest: &[u8]) -> Option<String> {
    let (&delim, body) = rest.split_first()?;
    if delim == b'\\' || delim == b'\n' || delim.is_ascii_alphanumeric() {
        return None;
    }
    let mut seen = 0;
    let mut i = 0;
    while i < body.len() && seen < 2 {
        match body.get(i) {
            Some(b'\\') => i += 2,
            Some(&b) if b == delim => {
                seen += 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    let flags = body.get(i..)?;
    let end = flags
        .iter()
        .position(|b| !b.is_ascii_alphanumeric())
        .unwrap_or(flags.len());
    Some(String::from_utf8_lossy(flags.get(..end)?).into_owned())
}

fn xargs_runs_command(lits: &[&str]) -> bool {
    const SHORT_VALUE: &str = "adEILnPs";
    const LONG_VALUE: &[&str] = &[
        "--arg-file",
        "--delimiter",
        "--eof",
        "--replace",
        "--max-lines",
        "--max-args",
        "--max-procs",
        "--max-chars",
        "--process-slot-var",
    ];
    let mut i = 0;
    while let Some(a) = lits.get(i) {
        if *a == "--" {
            return i + 1 < lits.len();
        }
        if !a.starts_with('-') || *a == "-" {
            return true;
        }
        if a.starts_with("--") {
            if LONG_VALUE.contains(a) {
                i += 1;
            }
        } else if a.len() == 2 && a.chars().nth(1).is_some_and(|f| SHORT_VALUE.contains(f)) {
            i += 1;
        }
        i += 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sed_scripts_that_write_or_execute_are_caught() {
        for s in [
            "w /tmp/x",
            "1e id",
            "s/a/b/e",
            "s/a/b/w out",
            "s|a|b|gw f",
            "$!w f",
            "/x/ w f",
            "{e id\n}",
        ] {
            assert!(sed_script_writes_or_runs(s), "{s}");
        }
        for s in ["s/a/b/g", "s/we/ew/", "p", "1,5d", "s/\\/e/x/g", "/write/p"] {
            assert!(!sed_script_writes_or_runs(s), "{s}");
        }
    }

    #[test]
    fn xargs_detects_a_command() {
        assert!(xargs_runs_command(&["rm"]));
        assert!(xargs_runs_command(&["-n", "1", "rm"]));
        assert!(xargs_runs_command(&["-I{}", "sh", "-c", "x"]));
        assert!(!xargs_runs_command(&["-n", "1"]));
        assert!(!xargs_runs_command(&[]));
    }
}
