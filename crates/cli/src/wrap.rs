//! `actiongate wrap -- <agent command>`: runs an agent that has no hook
//! with `$SHELL` pointing at a shim (`actiongate hook shell`), so every
//! command it runs through `$SHELL -c` is asked of the daemon first. What
//! a shim cannot see is listed in docs/hooks.md: programs started without
//! a shell, `/bin/sh` named directly instead of `$SHELL`, what is typed
//! into an interactive shell, and anything done in-process (file writes,
//! network calls).

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::hooks::HookArgs;

/// Flags of `wrap`.
#[derive(Debug, Args)]
pub struct WrapArgs {
    /// Connection, wait and fallbacks of the shim.
    #[command(flatten)]
    pub hook: HookArgs,
    /// The shell that runs what is allowed (default: `$SHELL`, else /bin/sh).
    #[arg(long, value_name = "PATH")]
    pub shell: Option<PathBuf>,
    /// The agent and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

/// Quotes a word for a POSIX shell script.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Writes the shim script into `dir`.
fn write_shim(dir: &Path, exe: &Path) -> std::io::Result<PathBuf> {
    let path = dir.join("sh");
    let mut f = std::fs::File::create(&path)?;
    writeln!(f, "#!/bin/sh")?;
    writeln!(
        f,
        "exec {} hook shell -- \"$@\"",
        sh_quote(&exe.display().to_string())
    )?;
    drop(f);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
    Ok(path)
}

/// `wrap`: the agent's exit status, or 126 when it cannot be started.
pub async fn run(a: WrapArgs) -> ExitCode {
    match wrap(a).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("actiongate wrap: {e}");
            ExitCode::from(126)
        }
    }
}

async fn wrap(a: WrapArgs) -> Result<ExitCode, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find actiongate: {e}"))?;
    let real = a
        .shell
        .clone()
        .or_else(|| std::env::var_os("SHELL").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/bin/sh"));
    if real.file_name().is_some_and(|n| n == "sh") && real.starts_with(std::env::temp_dir()) {
        return Err("SHELL already is an actiongate shim; pass --shell".to_owned());
    }
    let dir = std::env::temp_dir().join(format!(
        "actiongate-wrap-{}-{}",
        std::process::id(),
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default()
    ));
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| e.to_string())?;
    let shim = write_shim(&dir, &exe).map_err(|e| format!("cannot write the shim: {e}"))?;
    let conn = a.hook.connection()?;
    let mut cmd = tokio::process::Command::new(&a.command[0]);
    cmd.args(&a.command[1..])
        .env("SHELL", &shim)
        .env("ACTIONGATE_REAL_SHELL", &real)
        .env("ACTIONGATE_URL", &conn.url)
        .env("ACTIONGATE_HOOK_WAIT", a.hook.wait.to_string())
        .env(
            "ACTIONGATE_HOOK_ON_ERROR",
            format!("{:?}", a.hook.on_error).to_lowercase(),
        )
        .env(
            "ACTIONGATE_HOOK_ON_TIMEOUT",
            format!("{:?}", a.hook.on_timeout).to_lowercase(),
        )
        .env(
            "ACTIONGATE_WRAP_SESSION",
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
    if let Some(k) = &conn.key {
        cmd.env("ACTIONGATE_KEY", k);
    }
    let status = cmd.status().await;
    let _ = std::fs::remove_file(&shim);
    let _ = std::fs::remove_dir(&dir);
    let status = status.map_err(|e| format!("cannot run {}: {e}", a.command[0]))?;
    Ok(match status.code() {
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::from(128),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
    }
}
