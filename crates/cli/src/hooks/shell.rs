//! `actiongate hook shell`: the `$SHELL` shim of `actiongate wrap`. Called
//! as the shell (`$SHELL -c COMMAND …`), it asks the daemon about COMMAND
//! in the real shell's language (`tool:bash:` for bash and zsh, `tool:sh:`
//! for sh and dash) and, only when allowed, replaces itself with the real
//! shell and the same arguments. Without `-c` (a script, an interactive
//! shell), or with options it does not fully know, it asks about the
//! shell and its arguments. Denied, or any error: the reason on stderr and
//! exit status 126 ("cannot execute"), the command never runs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::Args;

use super::gate::{Origin, Verdict, Waiting};
use super::map::Call;
use super::{HookArgs, Parsed, bounded};
use crate::Exit;

/// Flags of `hook shell`.
#[derive(Debug, Args)]
pub struct ShellArgs {
    /// Connection, wait and fallbacks.
    #[command(flatten)]
    pub hook: HookArgs,
    /// The shell that runs what is allowed.
    #[arg(long, env = "ACTIONGATE_REAL_SHELL", default_value = "/bin/sh")]
    pub real_shell: PathBuf,
    /// The shell's own arguments (any bytes: one that is not UTF-8 is
    /// refused with 126, as any other failure).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_parser = clap::value_parser!(OsString))]
    pub args: Vec<OsString>,
}

/// The shell languages whose `-c` command the gate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// bash.
    Bash,
    /// POSIX sh: dash, ash, or bash run as `sh` (read the stricter way).
    Sh,
    /// zsh: its command is asked as bash, whose analysis treats what zsh
    /// evaluates and bash keeps as text as not plain.
    Zsh,
}

impl Family {
    /// The real shell's family, by its file name; `None` for a shell no
    /// analyser reads (fish, ksh, csh, …).
    pub fn of(shell: &Path) -> Option<Family> {
        match shell.file_name()?.to_str()? {
            "bash" => Some(Family::Bash),
            "sh" | "dash" | "ash" => Some(Family::Sh),
            "zsh" => Some(Family::Zsh),
            _ => None,
        }
    }

    /// The tool its command lines are asked as.
    fn tool(self) -> &'static str {
        match self {
            Family::Sh => "sh",
            Family::Bash | Family::Zsh => "bash",
        }
    }

    /// Whether `ch` is a one-letter option this shell takes on its command
    /// line (sh's are read with bash's: `/bin/sh` may be bash).
    fn knows(self, ch: char) -> bool {
        match self {
            Family::Bash | Family::Sh => "abcefhiklmnoprstuvxBCDEHIOPTV".contains(ch),
            Family::Zsh => ch.is_ascii_alphanumeric(),
        }
    }
}

/// bash's long options, which it also takes after a single `-`
/// (`-rcfile F` is `--rcfile F`); the first two take a value.
const BASH_LONG: &[&str] = &[
    "rcfile",
    "init-file",
    "debugger",
    "dump-po-strings",
    "dump-strings",
    "help",
    "login",
    "noediting",
    "noprofile",
    "norc",
    "posix",
    "pretty-print",
    "protected",
    "restricted",
    "verbose",
    "version",
    "wordexp",
];

/// The command line a shell invocation runs, and the arguments after it
/// (its `$0`, `$1`, …), when the shell was given `-c`: the first operand
/// after *all* options, as the shell reads its arguments (`sh -c -- CMD`,
/// `sh -c -e CMD`, `bash -co pipefail CMD` all run CMD; `-o`/`-O` and
/// `--rcfile`/`--init-file` take a value; zsh's `-b` ends the options).
/// `None` for no `-c`, and for anything not fully known (a long option
/// bash reads after one dash, such as `-rcfile`; an unknown long option;
/// a letter that is none of the shell's options; a shell no analyser
/// reads): then the whole invocation is asked, never guessed.
pub fn command_of(family: Option<Family>, args: &[String]) -> Option<(&str, &[String])> {
    let family = family?;
    let mut c = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" || a == "-" {
            i += 1;
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            match long {
                "rcfile" | "init-file" if family != Family::Zsh => i += 2,
                _ if family == Family::Zsh
                    && long.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
                {
                    i += 1
                }
                _ if family != Family::Zsh && BASH_LONG.contains(&long) => i += 1,
                _ => return None,
            }
            continue;
        }
        let Some(cluster) = a.strip_prefix('-').or_else(|| a.strip_prefix('+')) else {
            break;
        };
        if family != Family::Zsh && BASH_LONG.contains(&cluster) {
            // bash reads `-rcfile F` as `--rcfile F`; not guessed.
            return None;
        }
        i += 1;
        let mut ended = false;
        for ch in cluster.chars() {
            match ch {
                _ if !family.knows(ch) => return None,
                'c' => c = true,
                // The option's value is the next argument.
                'o' | 'O' => i += 1,
                // zsh: the end of the options, like `--`.
                'b' if family == Family::Zsh => ended = true,
                _ => {}
            }
        }
        if ended {
            break;
        }
    }
    if !c {
        return None;
    }
    let cmd = args.get(i)?;
    Some((cmd.as_str(), &args[i + 1..]))
}

/// What is asked about: the command, followed by the arguments it is
/// given (quoted), which it may run (`sh -c 'eval "$1"' sh CMD`), as the
/// real shell's tool; else the shell and all its arguments, quoted.
pub fn call_of(args: &[String], real_shell: &Path) -> Call {
    let family = Family::of(real_shell);
    let quoted = |d: &mut String, rest: &[String]| {
        for arg in rest {
            d.push(' ');
            d.push_str(&crate::wrap::sh_quote(arg));
        }
    };
    let tool = match family {
        Some(f) => f.tool().to_owned(),
        None => real_shell
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "shell".to_owned()),
    };
    let line = match command_of(family, args) {
        Some((cmd, rest)) => {
            let mut d = cmd.to_owned();
            quoted(&mut d, rest);
            d
        }
        None => {
            let mut d = real_shell.display().to_string();
            quoted(&mut d, args);
            d
        }
    };
    Call::ShellOf { tool, line }
}

/// `hook shell`: gates, then `exec`s the real shell.
pub async fn run(a: ShellArgs) -> Exit {
    let Some(args) = a
        .args
        .iter()
        .map(|s| s.to_str().map(str::to_owned))
        .collect::<Option<Vec<String>>>()
    else {
        eprintln!("actiongate: an argument of the shell is not UTF-8; nothing was asked or run");
        std::process::exit(126);
    };
    let parsed = Parsed {
        event: "shell".to_owned(),
        origin: Origin {
            runtime: "wrap",
            label: "a wrapped agent's shell",
            session: std::env::var("ACTIONGATE_WRAP_SESSION").ok(),
            call_id: None,
            cwd: std::env::current_dir()
                .ok()
                .map(|d| d.display().to_string()),
            dir: None,
            after_pre_tool: false,
            unsure: None,
        },
        calls: vec![call_of(&args, &a.real_shell)],
        rule: None,
        input: None,
    };
    let answer = bounded(&a.hook, &parsed, Waiting::Wait).await;
    if answer.verdict != Verdict::Allow {
        eprintln!("{}", answer.reason);
        std::process::exit(126);
    }
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new(&a.real_shell)
        .args(&a.args)
        .exec();
    eprintln!(
        "actiongate: cannot run the shell {}: {err}",
        a.real_shell.display()
    );
    std::process::exit(126);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    fn asked(a: &[&str], shell: &str) -> String {
        call_of(&v(a), Path::new(shell)).mapped().action_string()
    }

    #[test]
    fn the_command_is_the_first_operand_after_the_options() {
        let cmd = |a: &[&str]| {
            command_of(Some(Family::Bash), &v(a)).map(|(c, rest)| (c.to_owned(), rest.len()))
        };
        assert_eq!(cmd(&["-c", "ls -l"]), Some(("ls -l".into(), 0)));
        assert_eq!(cmd(&["-lc", "ls", "x"]), Some(("ls".into(), 1)));
        assert_eq!(cmd(&["-e", "-c", "true"]), Some(("true".into(), 0)));
        assert_eq!(cmd(&["-c", "--", "rm x"]), Some(("rm x".into(), 0)));
        assert_eq!(cmd(&["-c", "-e", "rm x"]), Some(("rm x".into(), 0)));
        assert_eq!(cmd(&["-co", "pipefail", "rm x"]), Some(("rm x".into(), 0)));
        assert_eq!(
            cmd(&["--rcfile", "f", "-c", "rm x"]),
            Some(("rm x".into(), 0))
        );
        assert_eq!(cmd(&["--norc", "-c", "rm x"]), Some(("rm x".into(), 0)));
        assert_eq!(cmd(&["script.sh", "-c"]), None);
        assert_eq!(cmd(&["--login"]), None);
        assert_eq!(cmd(&["-c"]), None);
        assert_eq!(cmd(&[]), None);
        assert_eq!(
            asked(&["-c", "eval \"$1\"", "sh", "it's"], "/bin/bash"),
            "tool:bash:eval \"$1\" 'sh' 'it'\\''s'"
        );
        assert_eq!(asked(&["x.sh"], "/bin/sh"), "tool:sh:/bin/sh 'x.sh'");
    }

    #[test]
    fn what_the_shell_would_read_otherwise_is_asked_whole() {
        // bash takes its long options after one dash: `-rcfile ls` is the
        // rc file `ls`, then `-c CMD`; `-verbose x -c ls` runs the script x.
        assert_eq!(
            asked(&["-rcfile", "ls", "-c", "touch x"], "/bin/bash"),
            "tool:bash:/bin/bash '-rcfile' 'ls' '-c' 'touch x'"
        );
        assert_eq!(
            asked(&["-verbose", "notes.txt", "-c", "ls"], "/bin/bash"),
            "tool:bash:/bin/bash '-verbose' 'notes.txt' '-c' 'ls'"
        );
        // zsh's -b ends the options: the next argument is the command.
        assert_eq!(
            asked(&["-c", "-b", "-;touch x", "ls"], "/usr/bin/zsh"),
            "tool:bash:-;touch x 'ls'"
        );
        // A letter the shell does not take, an unknown long option: whole.
        assert_eq!(
            asked(&["-cZ", "ls"], "/bin/bash"),
            "tool:bash:/bin/bash '-cZ' 'ls'"
        );
        assert_eq!(
            asked(&["--frobnicate", "-c", "ls"], "/bin/sh"),
            "tool:sh:/bin/sh '--frobnicate' '-c' 'ls'"
        );
    }

    #[test]
    fn a_command_is_asked_in_the_real_shells_language() {
        // dash has no `&>` and no `$'…'`: its lines are read as sh.
        assert_eq!(
            asked(&["-c", "ls &>/dev/null touch x"], "/bin/sh"),
            "tool:sh:ls &>/dev/null touch x"
        );
        assert_eq!(asked(&["-c", "ls"], "/usr/bin/dash"), "tool:sh:ls");
        assert_eq!(asked(&["-c", "ls"], "/bin/bash"), "tool:bash:ls");
        assert_eq!(asked(&["-c", "ls"], "/bin/zsh"), "tool:bash:ls");
        // A shell no analyser reads is asked by its name, whole.
        assert_eq!(
            asked(&["-c", "ls"], "/usr/bin/fish"),
            "tool:fish:/usr/bin/fish '-c' 'ls'"
        );
    }
}
