//! Command-specific knowledge: which commands run other commands or change
//! the shell, and which options turn read-only tools into writers.
//!
//! This is deliberately about forms, not names: whether `git` or `sed` is
//! allowed at all is the profile's business; this module only makes sure
//! that an allowed name cannot be used to write files or run programs.

use super::words::WordInfo;
use super::{Collector, Hazard};
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
pub(crate) struct Kind(u8);

impl Kind {
    const RUNNER: u8 = 1;
    const STATE: u8 = 1 << 1;
    const STATE_WITH_ARGS: u8 = 1 << 2;
    const FLAG_SAFE: u8 = 1 << 3;
    const CHECKED: u8 = 1 << 4;
    const INTERPRETER: u8 = 1 << 5;
    /// A reserved word of the shell grammar (`if`, `time`, …).
    const RESERVED: u8 = 1 << 6;
    /// `let`, which evaluates arithmetic.
    const LET: u8 = 1 << 7;

    fn is(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    /// In none of the lists (nor a reserved word).
    pub(crate) fn is_unknown(self) -> bool {
        self.0 == 0
    }

    /// A command whose job is to run another ([`RUNNERS`]).
    pub(crate) fn is_runner(self) -> bool {
        self.is(Self::RUNNER)
    }

    /// A reserved word, which changes the grammar when it starts a command.
    pub(crate) fn is_reserved(self) -> bool {
        self.is(Kind::RESERVED)
    }

    /// Whether [`inspect`] looks at the arguments.
    pub(crate) fn has_checked_arguments(self) -> bool {
        self.is(Kind::CHECKED) || self.is(Kind::INTERPRETER)
    }

    /// Whether [`judge_name`] or [`inspect`] may find a hazard in a
    /// command with this name and literal arguments; if not, such a
    /// command is plainly safe (`ls -la src`).
    pub(crate) fn may_be_hazardous(self) -> bool {
        self.is(Kind::RUNNER
            | Kind::STATE
            | Kind::STATE_WITH_ARGS
            | Kind::LET
            | Kind::CHECKED
            | Kind::INTERPRETER)
    }

    /// Looks `name` up in all the lists at once.
    pub(crate) fn of(name: &str) -> Kind {
        Kind::of_keyed(name, name_key(name.as_bytes()))
    }

    /// [`Kind::of`] for a caller that has the name's [`name_key`] at hand.
    pub(crate) fn of_keyed(name: &str, key: Option<u64>) -> Kind {
        static NAMES: OnceLock<Names> = OnceLock::new();
        Kind(NAMES.get_or_init(Names::new).bits(name, key))
    }
}

/// A command name of one to eight bytes as a little-endian `u64`, zero past
/// its end: compared and hashed as one number. `None` for other lengths and
/// for names holding a NUL byte (whose key could equal a shorter name's).
pub(crate) fn name_key(name: &[u8]) -> Option<u64> {
    if !(1..=8).contains(&name.len()) || name.contains(&0) {
        return None;
    }
    let mut padded = [0; 8];
    for (to, from) in padded.iter_mut().zip(name) {
        *to = *from;
    }
    Some(u64::from_le_bytes(padded))
}

/// Slots of the open-addressing table of short names: a power of two, at
/// least three times the number of names (about 150), so probes are short.
const SLOTS: usize = 512;

/// Every listed name with its [`Kind`] bits: names of up to eight bytes by
/// their [`name_key`] in an open-addressing table (one multiplication and
/// usually one comparison of two numbers, where a `HashMap<&str, _>` hashed
/// the string byte by byte and compared it with `memcmp`), the few longer
/// ones in a list.
struct Names {
    /// `(key, bits)`, key 0 for an empty slot (no name has key 0).
    slots: [(u64, u8); SLOTS],
    long: Vec<(&'static str, u8)>,
}

/// Every named list and the kind bit its names carry.
const LISTS: [(&[&str], u8); 8] = [
    (RUNNERS, Kind::RUNNER),
    (STATE, Kind::STATE),
    (STATE_WITH_ARGS, Kind::STATE_WITH_ARGS),
    (FLAG_SAFE, Kind::FLAG_SAFE),
    (CHECKED, Kind::CHECKED),
    (INTERPRETERS, Kind::INTERPRETER),
    (super::fast::RESERVED, Kind::RESERVED),
    (&["let"], Kind::LET),
];

impl Names {
    fn new() -> Self {
        let mut names = Names {
            slots: [(0, 0); SLOTS],
            long: Vec::new(),
        };
        for (list, bit) in LISTS {
            for &name in list {
                names.insert(name, bit);
            }
        }
        names
    }

    fn insert(&mut self, name: &'static str, bit: u8) {
        let Some(key) = name_key(name.as_bytes()) else {
            match self.long.iter_mut().find(|(n, _)| *n == name) {
                Some((_, bits)) => *bits |= bit,
                None => self.long.push((name, bit)),
            }
            return;
        };
        let home = slot(key);
        // The table has room to spare, so an empty or equal slot comes.
        for i in home..home + SLOTS {
            let (k, bits) = &mut self.slots[i % SLOTS];
            if *k == 0 || *k == key {
                *k = key;
                *bits |= bit;
                return;
            }
        }
    }

    fn bits(&self, name: &str, key: Option<u64>) -> u8 {
        let Some(key) = key else {
            return self
                .long
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(0, |&(_, bits)| bits);
        };
        let home = slot(key);
        for i in home..home + SLOTS {
            let (k, bits) = self.slots[i % SLOTS];
            if k == key {
                return bits;
            }
            if k == 0 {
                return 0;
            }
        }
        0
    }
}

/// The home slot of a key: Fibonacci hashing, the top nine bits of the key
/// times 2^64 / φ.
fn slot(key: u64) -> usize {
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 55) as usize
}

/// The hazards that follow from the name alone (and whether there are
/// arguments); false if one was recorded and the command needs no more
/// looking at.
pub(crate) fn judge_name(name: &str, kind: Kind, has_args: bool, c: &mut Collector) -> bool {
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
    if kind.is(Kind::LET) {
        c.hazard(Hazard::Arithmetic);
        return false;
    }
    true
}

/// Judges one simple command whose name is plain.
pub(crate) fn judge(name: &str, args: &[WordInfo<'_>], c: &mut Collector) {
    let kind = Kind::of(name);
    if !judge_name(name, kind, !args.is_empty(), c) {
        return;
    }
    if matches!(name, "test" | "[") {
        test_operands(name, args, c);
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
    if !kind.has_checked_arguments() {
        return;
    }
    // From here on only literal arguments matter; dynamic ones were flagged.
    let lits: Vec<&str> = args.iter().filter_map(|a| a.literal.as_deref()).collect();
    inspect(name, kind, &lits, c);
}

/// `test` and `[`: bash evaluates the subscript of `-v NAME[…]` and
/// `-R NAME[…]` as arithmetic, which can run commands, so their operand
/// must be a plain name. A word known only at run time could turn into
/// such an operator and operand (`[ "$a" "$b" ]`), and an unquoted one or a
/// glob into several words, so such words pass only as the operand of a
/// literal unary test or a side of a literal `=`/`!=`.
fn test_operands(name: &str, args: &[WordInfo<'_>], c: &mut Collector) {
    let lit = |i: usize| args.get(i).and_then(|a| a.literal.as_deref());
    let hazard = |c: &mut Collector, a: &WordInfo<'_>| {
        c.hazard(Hazard::DynamicArgument {
            command: name.to_owned(),
            word: a.raw.to_owned(),
        });
    };
    for (i, a) in args.iter().enumerate() {
        if matches!(a.literal.as_deref(), Some("-v" | "-R")) {
            let operand = args.get(i + 1);
            if operand.is_some_and(|o| super::words::may_subscript(o)) {
                c.hazard(Hazard::Arithmetic);
            }
            continue;
        }
        if a.glob {
            c.hazard(Hazard::GlobArgument {
                command: name.to_owned(),
                word: a.raw.to_owned(),
            });
            continue;
        }
        if a.literal.is_some() {
            continue;
        }
        let after_unary = i
            .checked_sub(1)
            .and_then(lit)
            .is_some_and(|p| p.len() == 2 && p.starts_with('-') && !matches!(p, "-v" | "-R"));
        let compared = [i.checked_sub(1), Some(i + 1)]
            .into_iter()
            .flatten()
            .filter_map(lit)
            .any(|op| matches!(op, "=" | "==" | "!="));
        if !a.quoted || !(after_unary || compared) {
            hazard(c, a);
        }
    }
}

/// The option-by-option checks of the commands in `CHECKED` and
/// `INTERPRETERS` (see [`Kind::has_checked_arguments`]), on their literal
/// arguments.
pub(crate) fn inspect(name: &str, kind: Kind, lits: &[&str], c: &mut Collector) {
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
        "sed" => super::sed::sed(lits, &unsafe_option, c),
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
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// The lists, scanned name by name.
    fn listed(name: &str) -> u8 {
        LISTS
            .iter()
            .filter(|(list, _)| list.contains(&name))
            .fold(0, |bits, (_, bit)| bits | bit)
    }

    #[test]
    fn every_listed_name_has_the_bits_of_its_lists() {
        for (list, _) in LISTS {
            for name in list {
                assert_eq!(Kind::of(name), Kind(listed(name)), "{name}");
                assert!(!Kind::of(name).is_unknown(), "{name}");
            }
        }
    }

    #[test]
    fn other_names_are_unknown() {
        for name in [
            "",
            "l",
            "lss",
            "ls ",
            "cargo",
            "gi",
            "gitt",
            "Git",
            "python4",
            "powershel",
            "powershells",
            "readarra",
            "a=b",
            "\0",
            "bashbash",
            "echo\0\0\0\0",
        ] {
            assert_eq!(listed(name), 0, "{name}");
            assert!(Kind::of(name).is_unknown(), "{name}");
        }
        // Every prefix and extension of a listed name that is not listed.
        for (list, _) in LISTS {
            for name in list {
                for end in 0..name.len() {
                    let prefix = &name[..end];
                    assert_eq!(Kind::of(prefix), Kind(listed(prefix)), "{prefix}");
                }
                let longer = format!("{name}x");
                assert_eq!(Kind::of(&longer), Kind(listed(&longer)), "{longer}");
            }
        }
    }

    /// Only the bits `may_be_hazardous` names lead to a hazard.
    #[test]
    fn harmless_kinds_give_no_hazard() {
        for name in [
            "ls", "cat", "echo", "cargo", "if", "wc", "grep", "true", "[",
        ] {
            let kind = Kind::of(name);
            assert!(!kind.may_be_hazardous(), "{name}");
            for has_args in [false, true] {
                let mut c = Collector::default();
                assert!(judge_name(name, kind, has_args, &mut c), "{name}");
                assert!(c.hazards.is_empty(), "{name}");
            }
        }
        for name in [
            "let", "eval", "set", "export", "git", "python", "sed", "env",
        ] {
            assert!(Kind::of(name).may_be_hazardous(), "{name}");
        }
    }

    /// The fast path skips the name check for listed names.
    #[test]
    fn every_listed_name_is_a_plain_command_name() {
        for (list, _) in LISTS {
            for name in list {
                let word = super::super::words::bare(name);
                assert_eq!(
                    super::super::words::command_name(&word).as_deref(),
                    Ok(*name)
                );
            }
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
