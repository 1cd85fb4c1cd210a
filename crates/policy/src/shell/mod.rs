//! Shell commands as the policy sees them: parsed with `brush-parser`, cut
//! into simple commands that are judged one by one, plus the hazards that
//! keep a command from ever being allowed without a human.
//!
//! `walk` turns the syntax tree into simple commands, `fast` handles the
//! common metacharacter-free pipelines without the full parser, `words`
//! reads single words, and `commands` (with `git`) knows which forms of
//! otherwise read-only commands write files or run programs.

mod commands;
mod fast;
mod git;
mod scan;
mod walk;
mod words;

use serde::Serialize;
use std::fmt;

/// Nested command substitutions deeper than this are not analyzed further.
const MAX_DEPTH: usize = 8;

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
}

impl ShellAnalysis {
    /// True if nothing caps the verdict.
    pub fn is_clean(&self) -> bool {
        self.hazards.is_empty()
    }
}

pub(crate) use fast::simple_hazard;

/// Parses a shell command and cuts it into simple commands and hazards.
pub fn analyze_shell(detail: &str) -> ShellAnalysis {
    let mut collector = Collector::default();
    if !fast::analyze(detail, &mut collector) {
        walk::analyze_program(detail, &mut collector);
    }
    collector.finish()
}

/// Accumulates the analysis while walking.
#[derive(Default)]
pub(crate) struct Collector {
    commands: Vec<String>,
    hazards: Vec<Hazard>,
    depth: usize,
}

impl Collector {
    pub(crate) fn hazard(&mut self, hazard: Hazard) {
        if !self.hazards.contains(&hazard) {
            self.hazards.push(hazard);
        }
    }

    fn finish(self) -> ShellAnalysis {
        ShellAnalysis {
            commands: self.commands,
            hazards: self.hazards,
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
        self.commands.push(text);
        match words::command_name(name) {
            Ok(plain) => commands::judge(plain, args, self),
            Err(hazard) => self.hazard(hazard),
        }
    }
}

#[cfg(test)]
mod tests;
