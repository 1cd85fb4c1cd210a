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

/// An upstream server that, once a call is forwarded to it, sends the
/// proxy pings by the thousand and stops reading what it is sent: the
/// proxy's answers fill the pipe to its stdin, and every later write to
/// it waits for good.
const DEAF: &str = r#"
import json, sys, time
def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "upstream", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": [
            {"name": "read_page", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call":
        for k in range(20000):
            send({"jsonrpc": "2.0", "id": "p%d" % k, "method": "ping"})
        while True:
            time.sleep(60)
"#;

/// A forwarded call to an upstream server that stops reading its input is
/// answered with an error result within about `--upstream-timeout`
/// (docs/mcp.md: never a call left unanswered): telling the upstream the
/// call was cancelled must not hold the answer when the upstream does not
/// read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_an_upstream_that_stops_reading_is_answered_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    crate::common::daemon::set_profile(&http, &d.base, &admin, "bot", serde_json::json!("open"))
        .await;
    let mut p = crate::mcp_proxy::Proxy::start_with(
        dir.path(),
        &d.base,
        &agent,
        &[],
        DEAF,
        &["--upstream-timeout", "2"],
    )
    .await;
    let start = Instant::now();
    let r = p.call("read_page").await;
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        crate::mcp_proxy::text_of(&r).starts_with("the upstream server failed:"),
        "{r}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    p.stop().await;
    d.stop();
}
