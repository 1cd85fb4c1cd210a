//! Black-box tests of the questions `actiongate mcp proxy` asks about new
//! or changed upstream tool definitions (docs/mcp.md, pinned tool
//! definitions): a question about a tool the upstream stopped listing
//! does not hold a place for good, and a daemon that refuses questions is
//! not asked again for every hidden tool at every listing.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, set_profile};
use crate::common::{call, client};
use crate::mcp_proxy::{Proxy, text_of};

/// An upstream whose tools are read from `tools.json` beside it at every
/// listing (a list of names, or of `[name, description]`).
const LISTING_FROM_A_FILE: &str = r#"
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
def tools():
    with open(os.path.join(here, "tools.json")) as f:
        listed = json.load(f)
    return [{"name": t, "inputSchema": {"type": "object"}} if isinstance(t, str) else
            {"name": t[0], "description": t[1], "inputSchema": {"type": "object"}}
            for t in listed]
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "upstream", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": tools()}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "ran " + msg["params"]["name"]}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

fn list_as(dir: &Path, tools: Value) {
    std::fs::write(dir.join("tools.json"), tools.to_string()).unwrap();
}

async fn names(p: &mut Proxy) -> Vec<String> {
    let l = p.request("tools/list", json!({})).await;
    l["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{l}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// The `mcp-pin` questions of agent `bot` with `status`.
async fn questions(http: &reqwest::Client, base: &str, admin: &str, status: &str) -> Vec<Value> {
    let (s, list) = call(
        http,
        Method::GET,
        format!("{base}/v1/actions?agent=bot&status={status}&limit=200"),
        admin,
        None,
    )
    .await;
    assert_eq!(s, 200, "{list}");
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a["tool"] == "mcp-pin")
        .collect()
}

/// A daemon (with `env`), its agent `bot` whose profile runs the
/// upstream's tools and asks anything else, and the proxy in front of
/// [`LISTING_FROM_A_FILE`] listing `first` at its first start.
async fn proxied(
    dir: &Path,
    env: &[(&str, &str)],
    first: Value,
) -> (Daemon, reqwest::Client, String, String, Proxy) {
    let d = Daemon::start(dir, env);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let profile = json!({"allow": ["tool:mcp__fs__(?s).*"], "ask": ["(?s).*"]});
    set_profile(&http, &d.base, &admin, "bot", profile).await;
    list_as(dir, first);
    let p = Proxy::start_with(dir, &d.base, &agent, &[], LISTING_FROM_A_FILE, &[]).await;
    (d, http, admin, agent, p)
}

/// Five questions about tools the upstream then stopped listing are
/// withdrawn, not left to hold the five places for good: a later new tool,
/// and a later change of a pinned one, are asked about (before, they
/// were hidden for good and no operator was ever asked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_about_tools_no_longer_listed_do_not_hide_later_ones_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let (d, http, admin, _agent, mut p) = proxied(dir.path(), &[], json!(["echo"])).await;
    assert_eq!(names(&mut p).await, ["echo"]);
    list_as(dir.path(), json!(["echo", "n1", "n2", "n3", "n4", "n5"]));
    assert_eq!(names(&mut p).await, ["echo"]);
    assert_eq!(questions(&http, &d.base, &admin, "pending").await.len(), 5);
    list_as(dir.path(), json!(["echo"]));
    assert_eq!(names(&mut p).await, ["echo"]);
    // An operator then denies whatever is still asked.
    for q in questions(&http, &d.base, &admin, "pending").await {
        let id = q["id"].as_str().unwrap();
        let (s, a) = call(
            &http,
            Method::POST,
            format!("{}/v1/actions/{id}/deny", d.base),
            &admin,
            Some(json!({})),
        )
        .await;
        assert_eq!(s, 200, "{a}");
    }
    list_as(dir.path(), json!(["echo", "n6"]));
    assert_eq!(names(&mut p).await, ["echo"]);
    let open = questions(&http, &d.base, &admin, "pending").await;
    assert_eq!(open.len(), 1, "{open:?}");
    assert!(
        open[0]["detail"].as_str().unwrap().starts_with("fs/n6 "),
        "{open:?}"
    );
    // A changed definition of the pinned tool is asked about too.
    list_as(dir.path(), json!([["echo", "changed"], "n6"]));
    assert!(names(&mut p).await.is_empty());
    let open = questions(&http, &d.base, &admin, "pending").await;
    assert!(
        open.iter()
            .any(|q| q["detail"].as_str().unwrap().starts_with("fs/echo ")),
        "{open:?}"
    );
    p.stop().await;
    d.stop();
}

/// How many questions the proxy failed to ask, by what it said.
fn refused_asks(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("proxy.err"))
        .unwrap_or_default()
        .matches("cannot ask about the definition")
        .count()
}

/// While the daemon refuses questions (the agent is at its pending
/// limit), an upstream offering 200 new tools costs one refused request,
/// not one per hidden tool at every listing and call (600 before); once
/// the delay passes and a place is free, the proxy asks again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_refusing_questions_is_not_asked_for_every_hidden_tool() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT", "2")];
    let (d, http, admin, agent, mut p) = proxied(dir.path(), &env, json!(["echo"])).await;
    assert_eq!(names(&mut p).await, ["echo"]);
    // The agent's own asked requests fill its pending places.
    let mut own = Vec::new();
    for i in 0..2 {
        let (s, a) = call(
            &http,
            Method::POST,
            format!("{}/v1/actions", d.base),
            &agent,
            Some(json!({"tool": "deploy", "detail": format!("n{i}")})),
        )
        .await;
        assert_eq!(s, 201, "{a}");
        own.push(a["id"].as_str().unwrap().to_owned());
    }
    let many: Vec<String> = std::iter::once("echo".to_owned())
        .chain((0..200).map(|i| format!("n{i}")))
        .collect();
    list_as(dir.path(), json!(many));
    assert_eq!(names(&mut p).await, ["echo"]);
    for _ in 0..2 {
        let r = p.call("echo").await;
        assert_eq!(text_of(&r), "ran echo", "{r}");
    }
    assert_eq!(refused_asks(dir.path()), 1);
    // A place frees up; after the delay the proxy asks again.
    let (s, a) = call(
        &http,
        Method::POST,
        format!("{}/v1/actions/{}/deny", d.base, own[0]),
        &admin,
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(names(&mut p).await, ["echo"]);
    assert_eq!(questions(&http, &d.base, &admin, "pending").await.len(), 1);
    assert_eq!(refused_asks(dir.path()), 2);
    p.stop().await;
    d.stop();
}
