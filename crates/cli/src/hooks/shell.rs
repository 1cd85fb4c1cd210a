//! `actiongate hook shell`: the `$SHELL` shim of `actiongate wrap`. Called
//! as the shell (`$SHELL -c COMMAND …`), it asks the daemon about
//! `tool:bash:COMMAND` and, only when allowed, replaces itself with the
//! real shell and the same arguments. Without `-c` (a script, an
//! interactive shell) it asks about the shell and its arguments. Denied,
//! or any error: the reason on stderr and exit status 126 ("cannot
//! execute"), the command never runs.

use std::path::PathBuf;

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
    /// The shell's own arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// The command line a shell invocation runs: the argument after the first
/// option cluster holding `c` (`-c`, `-lc`, `-ec`, …).
pub fn command_of(args: &[String]) -> Option<&str> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" || !a.starts_with('-') {
            return None;
        }
        if !a.starts_with("--") && a[1..].contains('c') {
            return it.next().map(String::as_str);
        }
    }
    None
}

/// `hook shell`: gates, then `exec`s the real shell.
pub async fn run(a: ShellArgs) -> Exit {
    let detail = match command_of(&a.args) {
        Some(cmd) => cmd.to_owned(),
        None => {
            let mut d = a.real_shell.display().to_string();
            for arg in &a.args {
                d.push(' ');
                d.push_str(arg);
            }
            d
        }
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
        },
        calls: vec![Call::Shell(detail)],
        rule: None,
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

    #[test]
    fn the_command_follows_the_c_option() {
        assert_eq!(command_of(&v(&["-c", "ls -l"])), Some("ls -l"));
        assert_eq!(command_of(&v(&["-lc", "ls", "x"])), Some("ls"));
        assert_eq!(command_of(&v(&["-e", "-c", "true"])), Some("true"));
        assert_eq!(command_of(&v(&["script.sh", "-c"])), None);
        assert_eq!(command_of(&v(&["--login"])), None);
        assert_eq!(command_of(&v(&[])), None);
    }
}
