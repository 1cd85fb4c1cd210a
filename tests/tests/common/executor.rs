//! The reference executor (`actiongate-executor`) as a real process,
//! registered with a daemon, for black-box tests that need both sides.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::binary;

/// A child process killed (SIGKILL) when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the executor, registered with the daemon at `base`; with
/// `async_mode` it answers 202 and posts each result back later.
pub fn start_executor(
    root: &Path,
    state: &Path,
    base: &str,
    admin: &str,
    async_mode: bool,
) -> Proc {
    start_executor_with(root, state, base, admin, async_mode, &[])
}

/// [`start_executor`] with more flags.
pub fn start_executor_with(
    root: &Path,
    state: &Path,
    base: &str,
    admin: &str,
    async_mode: bool,
    extra: &[&std::ffi::OsStr],
) -> Proc {
    let mut cmd = Command::new(binary("actiongate-executor"));
    if async_mode {
        cmd.arg("--async");
    }
    cmd.args(extra);
    let mut child = cmd
        .args([
            "--listen",
            "127.0.0.1:0",
            "--register",
            base,
            "--admin-key",
            admin,
        ])
        .arg("--root")
        .arg(root)
        .arg("--state-dir")
        .arg(state)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("actiongate-executor listening on "),
        "unexpected first line: {line:?}"
    );
    // Keep draining stdout so the executor never writes into a closed pipe.
    std::thread::spawn(move || for _ in out.lines() {});
    Proc(child)
}
