//! Shell commands as the policy sees them: parsed with `brush-parser`, cut
//! into simple commands that are judged one by one, plus the hazards that
//! keep a command from ever being allowed without a human.
//!
//! `walk` turns the syntax tree into simple commands, `fast` handles the
//! common metacharacter-free pipelines without the full parser, `words`
//! reads single words, and `commands` (with `git`) knows which forms of
//! otherwise read-only commands write files or run programs.

mod commands;
mod dialect;
mod fast;
mod git;
mod hidden;
mod scan;
mod sed;
mod walk;
mod words;

use serde::Serialize;
use std::fmt;

/// Nested command substitutions deeper than this are not analyzed further.
const MAX_DEPTH: usize = 8;

/// The longest detail the analysers read; a longer one is a hazard
/// ([`Hazard::TooLong`]) without being parsed. With the nesting bound of the
/// parser ([`walk`]) this bounds the time and stack any detail can take.
pub const MAX_LEN: usize = 16 * 1024;

/// The most list and pipeline separators (`;`, `&`, `|`, newline) a
/// detail may hold: the parser takes a few microseconds per command, so
/// this bounds the time a detail of [`MAX_LEN`] bytes can take (a few
/// milliseconds) where a line of 8,000 `x;` took 20 ms or more.
pub const MAX_SEPARATORS: usize = 512;

/// Whether `detail` is beyond what the analysis reads.
fn too_long(detail: &str) -> bool {
    detail.len() > MAX_LEN
        || detail
            .bytes()
            .filter(|b| matches!(b, b';' | b'&' | b'|' | b'\n'))
            .count()
            > MAX_SEPARATORS
}

/// How a tool's detail is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    /// A bash command line.
    Bash,
    /// A POSIX `sh` command line (dash on Debian): read as bash, and any
    /// construct the two read differently is a hazard.
    Sh,
    /// The argument list after `git`, split as shell words; the commands
    /// are its canonical form `<subcommand> <args>`.
    Git,
}

/// Analyses `detail` as `dialect` reads it.
pub fn analyze(dialect: Dialect, detail: &str) -> ShellAnalysis {
    let mut collector = Collector::default();
    if too_long(detail) {
        collector.hazard(Hazard::TooLong);
        return collector.finish();
    }
    match dialect {
        Dialect::Bash => {
            if !fast::analyze(detail, &mut collector) {
                walk::analyze_program(detail, &mut collector);
            }
        }
        Dialect::Sh => {
            if !fast::analyze(detail, &mut collector) {
                walk::analyze_program(detail, &mut collector);
                dialect::sh_only(detail, &mut collector);
            }
        }
        Dialect::Git => {
            collector.git_tool = true;
            let line = format!("git {detail}");
            if !fast::analyze(&line, &mut collector) {
                walk::analyze_program(&line, &mut collector);
            }
        }
    }
    // A line without hazards runs nothing the walk did not list; in one
    // with hazards, commands may hide where the walk does not look.
    if !collector.hazards.is_empty() {
        hidden::scan(detail, &mut collector);
    }
    collector.finish()
}

/// Something about a shell command that the policy cannot judge safely from
/// the command text. Any hazard caps the verdict at ask: the command may
/// still be denied, but never allowed without a human.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Hazard {
    /// The parser rejected the input.
    Unparsable {
        /// The parser's message.
        message: String,
    },
    /// The command nests too deeply to analyze.
    TooDeep,
    /// The command is longer than the analysis reads ([`MAX_LEN`] bytes,
    /// [`MAX_SEPARATORS`] separators).
    TooLong,
    /// A redirection from or to `/dev/tcp/…` or `/dev/udp/…`: bash opens a
    /// network connection.
    Network {
        /// The redirection target as written.
        target: String,
    },
    /// A construct that bash reads one way and POSIX `sh` (dash) another,
    /// in a line that `sh` runs.
    BashOnly {
        /// The construct.
        construct: String,
    },
    /// A construct bash reads as plain text that zsh, the shell many
    /// agents run their commands in (macOS's default), evaluates: a
    /// `[…]` right after a parameter is a subscript there, read as
    /// arithmetic that runs a quoted `$(…)`; `${(e)…}`, `${~…}` and the
    /// like are expansions bash cannot parse.
    ZshOnly {
        /// The construct.
        construct: String,
    },
    /// A git argument list that also runs something other than git.
    NotGit {
        /// The other command.
        command: String,
    },
    /// A subcommand the tool does not have built in: an alias or an
    /// external program, so what runs is not what the text shows.
    UnknownSubcommand {
        /// The tool.
        command: String,
        /// The subcommand as written.
        subcommand: String,
    },
    /// `$(…)` or backticks: the output of a command becomes part of another.
    CommandSubstitution,
    /// `<(…)` or `>(…)`.
    ProcessSubstitution,
    /// `$((…))`, `((…))` or `let`: bash arithmetic can run commands through
    /// array subscripts.
    Arithmetic,
    /// A parameter expansion other than a plain `$NAME` / `${NAME}`.
    ComplexExpansion {
        /// The word holding it.
        word: String,
    },
    /// An argument whose value is only known at run time, given to a command
    /// whose options can write files or run programs.
    DynamicArgument {
        /// The command.
        command: String,
        /// The argument as written.
        word: String,
    },
    /// An unquoted glob or brace expansion that could expand into options.
    GlobArgument {
        /// The command.
        command: String,
        /// The argument as written.
        word: String,
    },
    /// Output redirected to a file (anything but `/dev/null` and the like).
    FileRedirect {
        /// The redirection target as written.
        target: String,
    },
    /// A variable assignment (`A=1 cmd`, `A=1`, a `for` loop over a
    /// variable that is not lowercase).
    Assignment {
        /// The variable.
        name: String,
    },
    /// The command name is quoted, escaped, expanded or not plain ASCII, so
    /// what runs is not what the text shows.
    HiddenCommandName {
        /// The command word as written.
        word: String,
    },
    /// The command is named by a path (`./cat`, `/bin/ls`), not looked up
    /// by name.
    PathCommandName {
        /// The command word as written.
        word: String,
    },
    /// The command runs another command (`eval`, `exec`, `source`, `bash -c`,
    /// `xargs cmd`, `env cmd`, `sudo`, `find -exec`, …).
    RunsCommand {
        /// The command doing the running.
        command: String,
    },
    /// The command changes the shell itself (`export`, `declare`, `alias`,
    /// `set`, `read`, …), which affects later commands.
    ChangesShellState {
        /// The command.
        command: String,
    },
    /// An option or argument that makes an otherwise read-only command write
    /// files or run programs (`sed -i`, `git diff --output`, `tee f`, …).
    UnsafeOption {
        /// The command.
        command: String,
        /// The option or argument as written.
        option: String,
    },
    /// A function definition, which can shadow any command later.
    FunctionDefinition {
        /// The function name.
        name: String,
    },
    /// A `coproc`.
    Coprocess,
}

impl fmt::Display for Hazard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unparsable { message } => {
                write!(f, "the command could not be parsed ({message})")
            }
            Self::TooDeep => f.write_str("the command nests too deeply to analyze"),
            Self::TooLong => write!(
                f,
                "the command is too long to analyze (over {MAX_LEN} bytes)"
            ),
            Self::Network { target } => {
                write!(f, "it opens a network connection (`{target}`)")
            }
            Self::BashOnly { construct } => write!(
                f,
                "`{construct}` means something else in sh (dash) than in bash"
            ),
            Self::ZshOnly { construct } => write!(
                f,
                "`{construct}` is evaluated by zsh, which the agent's shell may be"
            ),
            Self::NotGit { command } => write!(f, "it also runs `{command}`, which is not git"),
            Self::UnknownSubcommand {
                command,
                subcommand,
            } => write!(
                f,
                "`{command} {subcommand}` is not a built-in subcommand (an alias or another program may run)"
            ),
            Self::CommandSubstitution => f.write_str("it uses command substitution"),
            Self::ProcessSubstitution => f.write_str("it uses process substitution"),
            Self::Arithmetic => f.write_str("it uses shell arithmetic, which can run commands"),
            Self::ComplexExpansion { word } => {
                write!(f, "`{word}` uses a complex parameter expansion")
            }
            Self::DynamicArgument { command, word } => {
                write!(
                    f,
                    "`{command}` gets an argument known only at run time (`{word}`)"
                )
            }
            Self::GlobArgument { command, word } => {
                write!(
                    f,
                    "`{command}` gets an unquoted pattern (`{word}`) that could expand into options"
                )
            }
            Self::FileRedirect { target } => {
                write!(f, "output is redirected to a file (`{target}`)")
            }
            Self::Assignment { name } => write!(f, "it assigns the variable `{name}`"),
            Self::HiddenCommandName { word } => {
                write!(
                    f,
                    "the command name `{word}` is quoted, escaped or expanded"
                )
            }
            Self::PathCommandName { word } => {
                write!(f, "the command is named by a path (`{word}`)")
            }
            Self::RunsCommand { command } => write!(f, "`{command}` runs another command"),
            Self::ChangesShellState { command } => {
                write!(f, "`{command}` changes the shell's state")
            }
            Self::UnsafeOption { command, option } => {
                write!(
                    f,
                    "`{command}` with `{option}` can write files or run programs"
                )
            }
            Self::FunctionDefinition { name } => write!(f, "it defines the function `{name}`"),
            Self::Coprocess => f.write_str("it starts a coprocess"),
        }
    }
}

/// A shell command cut into the simple commands that would run, each in a
/// canonical form (`ls -la`, words separated by one space, quoting only where
/// needed), plus every hazard found.
///
/// Commands inside substitutions are listed too, so deny patterns see them.
/// Redirections and assignments are not part of a command's text; they are
/// judged as hazards.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ShellAnalysis {
    /// The simple commands. Commands inside a substitution come before the
    /// command that uses their output.
    pub commands: Vec<String>,
    /// What keeps the command from being auto-allowed; empty if nothing.
    pub hazards: Vec<Hazard>,
    /// Commands the line may run that are not in `commands`: found by
    /// reading the raw text of constructs the walk does not enter
    /// (`${x:-$(cmd)}`, `$(( $(cmd) ))`, `[[ -v 'a[$(cmd)]' ]]`, …). Only
    /// a line with hazards has any, so they are shown to deny patterns
    /// alone: the line is never allowed anyway.
    pub hidden: Vec<String>,
    /// Whether a command may run more than once as written: the line has
    /// a loop (`for`, `while`, `until`) or defines a function (which may
    /// be called any number of times). A count-limited grant counts one
    /// use per command written, so it never allows such a line.
    #[serde(skip)]
    pub repeats: bool,
}

impl ShellAnalysis {
    /// True if nothing caps the verdict.
    pub fn is_clean(&self) -> bool {
        self.hazards.is_empty()
    }
}

pub(crate) use fast::simple_hazard;
pub(crate) use git::simple_hazard as git_simple_hazard;

impl Collector {
    /// The canonical form of a git command line given its arguments:
    /// `<subcommand> <args>`, inert global options left out. (Hazardous
    /// global options are recorded when the command is judged.)
    fn git_canonical(&self, args: &[words::WordInfo<'_>]) -> String {
        let mut scratch = Collector::default();
        let lits: Vec<&str> = args.iter().map_while(|a| a.literal.as_deref()).collect();
        let skip = git::global_options(&lits, &mut scratch);
        let mut text = String::new();
        for (i, arg) in args.iter().skip(skip).enumerate() {
            if i > 0 {
                text.push(' ');
            }
            words::render(arg, &mut text);
        }
        text
    }
}

/// Parses a bash command and cuts it into simple commands and hazards.
pub fn analyze_shell(detail: &str) -> ShellAnalysis {
    analyze(Dialect::Bash, detail)
}

/// Accumulates the analysis while walking.
#[derive(Default)]
pub(crate) struct Collector {
    commands: Vec<String>,
    hazards: Vec<Hazard>,
    hidden: Vec<String>,
    /// Bytes of text the search for hidden commands has read or written.
    hidden_spent: usize,
    depth: usize,
    /// Reading the `git` tool's detail: `git` commands are recorded in
    /// canonical form, anything else is a hazard.
    git_tool: bool,
    /// A loop or a function was walked ([`ShellAnalysis::repeats`]).
    pub(crate) repeats: bool,
}

impl Collector {
    pub(crate) fn hazard(&mut self, hazard: Hazard) {
        if !self.hazards.contains(&hazard) {
            self.hazards.push(hazard);
        }
    }

    /// Records a command's canonical text without judging it.
    pub(crate) fn push_command(&mut self, text: String) {
        self.commands.push(text);
    }

    /// Records a command only deny patterns are to see, unless it is
    /// listed already.
    pub(crate) fn hide(&mut self, text: String) {
        if !self.commands.contains(&text) && !self.hidden.contains(&text) {
            self.hidden.push(text);
        }
    }

    fn finish(self) -> ShellAnalysis {
        ShellAnalysis {
            commands: self.commands,
            hazards: self.hazards,
            hidden: self.hidden,
            repeats: self.repeats,
        }
    }

    /// Judges one simple command: its name, then its arguments, and records
    /// its canonical text.
    pub(crate) fn simple_command(&mut self, name: &words::WordInfo, args: &[words::WordInfo]) {
        let mut text = String::with_capacity(
            name.raw.len() + args.iter().map(|a| a.raw.len() + 1).sum::<usize>(),
        );
        words::render(name, &mut text);
        for arg in args {
            text.push(' ');
            words::render(arg, &mut text);
        }
        let plain = words::command_name(name);
        if self.git_tool {
            if plain.as_deref() == Ok(git::TOOL) {
                let canonical = self.git_canonical(args);
                self.commands.push(canonical);
            } else {
                self.hazard(Hazard::NotGit {
                    command: text.clone(),
                });
                self.commands.push(text);
            }
        } else {
            self.commands.push(text);
        }
        match plain {
            Ok(plain) => {
                commands::judge(&plain, args, self);
                if self.runs_its_arguments(&plain) {
                    hidden::arguments(args, self);
                }
            }
            Err(hazard) => self.hazard(hazard),
        }
    }

    /// Whether `name` (`sudo`, `env`, `eval`, `bash -c`, …) was found to
    /// run a command given in its arguments. For git, any option that
    /// runs programs counts (`bisect run`, `submodule foreach`, `-c
    /// core.pager=…`).
    pub(crate) fn runs_its_arguments(&self, name: &str) -> bool {
        let named = |command: &str| {
            command
                .strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
        };
        self.hazards.iter().any(|h| match h {
            Hazard::RunsCommand { command } => named(command),
            Hazard::UnsafeOption { command, .. } => name == git::TOOL && named(command),
            _ => false,
        })
    }
}

#[cfg(test)]
mod tests;
