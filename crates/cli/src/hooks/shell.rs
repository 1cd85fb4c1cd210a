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

/// The command line a shell invocation runs, and the arguments after it
/// (its `$0`, `$1`, …), when the shell was given `-c`: as sh and bash read
/// their arguments, the first operand after *all* options (`sh -c -- CMD`,
/// `sh -c -e CMD`, `bash -co pipefail CMD` all run CMD), with `-o`/`-O`
/// and bash's `--rcfile`/`--init-file` taking a value.
pub fn command_of(args: &[String]) -> Option<(&str, &[String])> {
    let mut c = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" || a == "-" {
            i += 1;
            break;
        }
        if a == "--rcfile" || a == "--init-file" {
            i += 2;
            continue;
        }
        if a.starts_with("--") {
            i += 1;
            continue;
        }
        let Some(cluster) = a.strip_prefix('-').or_else(|| a.strip_prefix('+')) else {
            break;
        };
        i += 1;
        for ch in cluster.chars() {
            match ch {
                'c' => c = true,
                // The option's value is the next argument.
                'o' | 'O' => i += 1,
                _ => {}
            }
        }
    }
    if !c {
        return None;
    }
    let cmd = args.get(i)?;
    Some((cmd.as_str(), &args[i + 1..]))
}

/// The detail asked about: the command, followed by the arguments it is
/// given (quoted), which it may run (`sh -c 'eval "$1"' sh CMD`).
pub fn detail_of(args: &[String], real_shell: &str) -> String {
    match command_of(args) {
        Some((cmd, rest)) => {
            let mut d = cmd.to_owned();
            for arg in rest {
                d.push(' ');
                d.push_str(&crate::wrap::sh_quote(arg));
            }
            d
        }
        None => {
            let mut d = real_shell.to_owned();
            for arg in args {
                d.push(' ');
                d.push_str(arg);
            }
            d
        }
    }
}

/// `hook shell`: gates, then `exec`s the real shell.
pub async fn run(a: ShellArgs) -> Exit {
    let detail = detail_of(&a.args, &a.real_shell.display().to_string());
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
    fn the_command_is_the_first_operand_after_the_options() {
        let cmd = |a: &[&str]| command_of(&v(a)).map(|(c, rest)| (c.to_owned(), rest.len()));
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
        assert_eq!(cmd(&["script.sh", "-c"]), None);
        assert_eq!(cmd(&["--login"]), None);
        assert_eq!(cmd(&["-c"]), None);
        assert_eq!(cmd(&[]), None);
        assert_eq!(
            detail_of(&v(&["-c", "eval \"$1\"", "sh", "it's"]), "/bin/sh"),
            "eval \"$1\" 'sh' 'it'\\''s'"
        );
        assert_eq!(detail_of(&v(&["x.sh"]), "/bin/sh"), "/bin/sh x.sh");
    }
}
