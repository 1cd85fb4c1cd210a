//! Black-box tests of what an upstream MCP server can do to
//! `actiongate mcp proxy` before and around the calls it gates.

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::Command;

use crate::common::binary;
use crate::common::client;
use crate::common::daemon::{Daemon, agent_key};

/// An upstream server that reads what it is sent and never answers.
const SILENT: &str = r#"
import sys
for line in sys.stdin:
    pass
"#;

/// An upstream server that never answers `initialize` holds the proxy for
/// no longer than `--upstream-timeout` (docs/mcp.md: everything the proxy
/// asks the upstream is bounded by it): the proxy gives up and exits with
/// an error, so the agent's client sees a server that failed to start,
/// instead of one that hangs for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_never_answers_initialize_fails_the_proxy_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let script = dir.path().join("silent.py");
    std::fs::write(&script, SILENT).unwrap();
    let start = Instant::now();
    let mut child = Command::new(binary("actiongate"))
        .args(["mcp", "proxy", "--url", &d.base, "--name", "fs", "--pins"])
        .arg(dir.path().join("pins.json"))
        .args(["--upstream-timeout", "2", "--"])
        .arg("python3")
        .arg(&script)
        .env("ACTIONGATE_KEY", &agent)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;
    let _ = child.kill().await;
    let status = status.expect("the proxy gave up within 20 s").unwrap();
    assert!(!status.success(), "{status}");
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    d.stop();
}
