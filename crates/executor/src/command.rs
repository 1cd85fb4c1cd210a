//! `execute_command`: runs `<shell> -c <command>` in the root with a
//! timeout, capturing exit status, stdout and stderr (each capped).
//!
//! The command gets its own process group, and the whole group is killed on
//! timeout and again when the shell exits, so a `sleep 60` started by the
//! command cannot outlive it or hold its output pipes open: commands run to
//! completion, they do not start services. The executor's own secrets
//! (`ACTIONGATE_KEY`, `ACTIONGATE_EXECUTOR_SECRET`) are removed from the
//! command's environment; stdin is empty.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

/// Environment variables never passed to commands.
pub const SCRUBBED_ENV: [&str; 2] = ["ACTIONGATE_KEY", "ACTIONGATE_EXECUTOR_SECRET"];

/// How long to wait for output pipes to close once the group is killed.
const DRAIN: Duration = Duration::from_secs(2);

/// What a command did.
#[derive(Debug, Clone, Serialize)]
pub struct CommandOutput {
    /// The shell that ran it.
    pub shell: String,
    /// Exit code; `None` if killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that killed it, if any.
    pub signal: Option<i32>,
    /// Whether the timeout killed it.
    pub timed_out: bool,
    /// Standard output (invalid UTF-8 replaced), at most the cap.
    pub stdout: String,
    /// Standard error, at most the cap.
    pub stderr: String,
    /// Whether stdout was cut at the cap.
    pub stdout_truncated: bool,
    /// Whether stderr was cut at the cap.
    pub stderr_truncated: bool,
    /// Whether either was cut.
    pub truncated: bool,
    /// Wall time.
    pub duration_ms: u64,
}

impl CommandOutput {
    /// Whether it exited 0 in time.
    pub fn succeeded(&self) -> bool {
        !self.timed_out && self.exit_code == Some(0)
    }
}

/// Runs `command` with `shell -c` in `cwd`; `shell` is the program and
/// its options before `-c` (`["bash"]`, `["bash", "--posix"]`).
pub async fn run(
    cwd: &Path,
    shell: &[&str],
    command: &str,
    timeout: Duration,
    cap: usize,
) -> std::io::Result<CommandOutput> {
    let started = Instant::now();
    let (program, options) = shell
        .split_first()
        .ok_or_else(|| std::io::Error::other("no shell given"))?;
    let mut cmd = Command::new(program);
    cmd.args(options)
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    let mut child = cmd.spawn()?;
    let pgid = child.id();
    let out = tokio::spawn(read_capped(child.stdout.take(), cap));
    let err = tokio::spawn(read_capped(child.stderr.take(), cap));
    let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => (Some(status?), false),
        Err(_) => {
            kill_group(pgid).await;
            let _ = child.start_kill();
            (child.wait().await.ok(), true)
        }
    };
    // Whatever the command left behind in its group goes too.
    kill_group(pgid).await;
    let (stdout, stdout_truncated) = drain(out).await;
    let (stderr, stderr_truncated) = drain(err).await;
    let (exit_code, signal) = codes(status);
    Ok(CommandOutput {
        shell: shell.join(" "),
        exit_code,
        signal,
        timed_out,
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        truncated: stdout_truncated || stderr_truncated,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

fn codes(status: Option<ExitStatus>) -> (Option<i32>, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) => (s.code(), s.signal()),
        None => (None, None),
    }
}

/// Kills process group `pgid` with SIGKILL. The workspace forbids `unsafe`,
/// so instead of `kill(2)` this asks `sh`'s built-in `kill`; a group that is
/// already gone is not an error.
async fn kill_group(pgid: Option<u32>) {
    let Some(pgid) = pgid else { return };
    let result = Command::new("sh")
        .arg("-c")
        .arg(format!("kill -s KILL -- -{pgid} 2>/dev/null"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    if let Err(e) = result {
        tracing::warn!(pgid, error = %e, "cannot run kill for a command's process group");
    }
}

async fn drain(task: tokio::task::JoinHandle<(Vec<u8>, bool)>) -> (String, bool) {
    match tokio::time::timeout(DRAIN, task).await {
        Ok(Ok((bytes, truncated))) => (String::from_utf8_lossy(&bytes).into_owned(), truncated),
        // A process outside the group still holds the pipe: stop reading.
        _ => (String::new(), true),
    }
}

async fn read_capped<R: AsyncRead + Unpin>(reader: Option<R>, cap: usize) -> (Vec<u8>, bool) {
    let Some(mut reader) = reader else {
        return (Vec::new(), false);
    };
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut truncated = false;
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(buf.len());
                if n > room {
                    truncated = true;
                }
                buf.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
    (buf, truncated)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn captures_exit_code_and_both_streams() {
        let dir = tempfile::tempdir().unwrap();
        let o = run(
            dir.path(),
            &["sh"],
            "echo out; echo err >&2; exit 3",
            Duration::from_secs(10),
            1024,
        )
        .await
        .unwrap();
        assert_eq!(o.exit_code, Some(3));
        assert_eq!(o.stdout, "out\n");
        assert_eq!(o.stderr, "err\n");
        assert!(!o.succeeded());
    }

    #[tokio::test]
    async fn output_is_capped_and_flagged() {
        let dir = tempfile::tempdir().unwrap();
        let o = run(
            dir.path(),
            &["sh"],
            "head -c 100000 /dev/zero | tr '\\0' x",
            Duration::from_secs(10),
            1000,
        )
        .await
        .unwrap();
        assert_eq!(o.stdout.len(), 1000);
        assert!(o.stdout_truncated && o.truncated && !o.stderr_truncated);
        assert!(o.succeeded());
    }

    #[tokio::test]
    async fn the_timeout_kills_the_whole_group_quickly() {
        let dir = tempfile::tempdir().unwrap();
        let t = Instant::now();
        let o = run(
            dir.path(),
            &["sh"],
            "sleep 60; echo never",
            Duration::from_millis(300),
            1024,
        )
        .await
        .unwrap();
        assert!(o.timed_out);
        assert!(!o.succeeded());
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[tokio::test]
    async fn runs_in_the_given_directory() {
        let dir = tempfile::tempdir().unwrap();
        let o = run(dir.path(), &["sh"], "pwd", Duration::from_secs(10), 1024)
            .await
            .unwrap();
        let canon = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(o.stdout, format!("{}\n", canon.display()));
    }
}
