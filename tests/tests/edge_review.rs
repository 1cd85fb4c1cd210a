//! Black-box tests from an adversarial review of the surfaces an upstream
//! MCP server (behind `actiongate mcp proxy`) and an executor (behind a
//! handler's webhook) hold: what their answers could make the gate allow,
//! skip, or wait for. The chat half of the review is in
//! `crates/server/tests/connectors/edge_review.rs`.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, role_key, set_profile};
use crate::common::{call, client};
use crate::mcp_proxy::{Proxy, text_of};

/// An upstream MCP server on stdio whose tools are named in
/// `UPSTREAM_TOOLS`; it serves one resource, `note://1`, and as
/// `UPSTREAM_MODE` says, lists its tools on pages without end (`endless`),
/// never answers a listing after the first (`silent_list`), offers 20
/// new tools in every listing after the first (`grow`), describes its
/// tools anew in every listing (`vary`), or answers a call with the
/// params it received (`echo`).
const UPSTREAM: &str = r#"
import json, os, sys
names = json.loads(os.environ["UPSTREAM_TOOLS"])
mode = os.environ.get("UPSTREAM_MODE", "")
def tools_of(listed):
    described = {"description": "v%d" % listed} if mode == "vary" else {}
    return [dict(name=n, inputSchema={"type": "object"}, **described) for n in names]
tools = tools_of(0)
listed = 0
def answer(i, result):
    print(json.dumps({"jsonrpc": "2.0", "id": i, "result": result}), flush=True)
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    i, method = msg["id"], msg.get("method")
    if method == "initialize":
        answer(i, {"protocolVersion": "2025-06-18",
                   "capabilities": {"tools": {}, "resources": {}},
                   "serverInfo": {"name": "upstream", "version": "1"}})
    elif method == "tools/list":
        listed += 1
        if mode == "endless":
            page = [{"name": "t%d" % listed, "inputSchema": {"type": "object"}}]
            answer(i, {"tools": tools + page, "nextCursor": "c%d" % listed})
        elif mode == "silent_list" and listed > 1:
            pass
        elif mode == "grow" and listed > 1:
            more = [{"name": "n%d" % k, "inputSchema": {"type": "object"}} for k in range(20)]
            answer(i, {"tools": tools + more})
        else:
            answer(i, {"tools": tools_of(listed) if listed > 1 else tools})
    elif method == "tools/call" and mode == "echo":
        got = json.dumps(msg["params"], sort_keys=True)
        answer(i, {"content": [{"type": "text", "text": got}]})
    elif method == "tools/call":
        answer(i, {"content": [{"type": "text", "text": "ran " + msg["params"]["name"]}]})
    elif method == "resources/read":
        answer(i, {"contents": [{"uri": msg["params"]["uri"], "text": "from a stranger"}]})
    else:
        answer(i, {})
"#;

/// The actions of `agent` whose tool is `tool`, newest first.
async fn actions_of(http: &reqwest::Client, base: &str, admin: &str, tool: &str) -> Vec<Value> {
    let (s, list) = call(
        http,
        Method::GET,
        format!("{base}/v1/actions?agent=bot"),
        admin,
        None,
    )
    .await;
    assert_eq!(s, 200, "{list}");
    list["items"]
        .as_array()
        .or(list.as_array())
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a["tool"] == tool)
        .collect()
}

/// Reads the proxy's output until the answer to request `id`.
async fn answer_to(p: &mut Proxy, id: i64) -> Value {
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let line = p.stdout.next_line().await.unwrap().expect("an answer");
            let msg: Value = serde_json::from_str(&line).unwrap();
            if msg["id"] == json!(id) {
                return msg;
            }
        }
    })
    .await
    .expect("an answer within 30 s")
}

/// After a tool call or a resource read through the proxy (what an
/// upstream server answers is untrusted input), a way out through the
/// proxy is asked, as `docs/sessions.md` says of every `mcp__*` call: the
/// proxy's actions belong to a session, so the read taints it, and the
/// resource read counts as a read of untrusted content too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_answer_taints_the_proxys_session_so_a_way_out_is_asked() {
    for first in ["tool", "resource"] {
        let dir = tempfile::tempdir().unwrap();
        let d = Daemon::start(dir.path(), &[]);
        let http = client();
        let admin = d.admin_key();
        let agent = agent_key(&http, &d.base, &admin, "bot").await;
        // `open` allows everything but keeps the presets' taints and guarded.
        set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
        let tools = ["read_page", "send_email"];
        let mut p = Proxy::start_with(dir.path(), &d.base, &agent, &tools, UPSTREAM, &[]).await;
        if first == "tool" {
            let r = p.call("read_page").await;
            assert_eq!(text_of(&r), "ran read_page", "{r}");
        } else {
            let r = p
                .request("resources/read", json!({"uri": "note://1"}))
                .await;
            assert_eq!(r["result"]["contents"][0]["text"], "from a stranger", "{r}");
        }
        p.send(json!({"jsonrpc": "2.0", "id": 900, "method": "tools/call",
                      "params": {"name": "send_email", "arguments": {"to": "x@example.com"}}}))
            .await;
        let mut sent = Vec::new();
        for _ in 0..200 {
            sent = actions_of(&http, &d.base, &admin, "mcp__fs__send_email").await;
            if !sent.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(sent.len(), 1, "{sent:?}");
        let a = &sent[0];
        assert_eq!(a["status"], "pending", "after a {first} read: {a}");
        assert!(
            a["decision"]["reason"]
                .as_str()
                .unwrap_or("")
                .contains("tainted"),
            "{a}"
        );
        let id = a["id"].as_str().unwrap();
        let (s, b) = call(
            &http,
            Method::POST,
            format!("{}/v1/actions/{id}/deny", d.base),
            &admin,
            Some(json!({"reason": "no"})),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        let r = answer_to(&mut p, 900).await;
        assert_eq!(r["result"]["isError"], true, "{r}");
        assert!(!text_of(&r["result"]).starts_with("ran "), "{r}");
        p.stop().await;
        d.stop();
    }
}

/// An upstream server that lists its tools on pages without end, or stops
/// answering listings, neither holds the agent's calls for ever nor grows
/// the proxy's memory: the listing ends at a bound, and the call is
/// answered with an error result within `--upstream-timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_listing_without_end_or_answer_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    let flags = ["--upstream-timeout", "3"];
    for mode in ["endless", "silent_list"] {
        let dir = tempfile::tempdir().unwrap();
        let script = UPSTREAM.replace(
            "mode = os.environ.get(\"UPSTREAM_MODE\", \"\")",
            &format!("mode = {mode:?}"),
        );
        let mut p = Proxy::start_with(dir.path(), &d.base, &agent, &["ok"], &script, &flags).await;
        if mode == "silent_list" {
            // The first listing is answered (and pins the tools).
            let l = p.request("tools/list", json!({})).await;
            assert!(l.get("result").is_some(), "{l}");
        }
        let started = std::time::Instant::now();
        let r = p.call("ok").await;
        assert_eq!(r["isError"], true, "{mode}: {r}");
        let why = if mode == "endless" {
            "the upstream server listed more than 100 pages"
        } else {
            "the upstream server did not answer within 3 s"
        };
        assert!(text_of(&r).contains(why), "{mode}: {r}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{mode}: {:?}",
            started.elapsed()
        );
        let l = p.request("tools/list", json!({})).await;
        assert!(l.get("error").is_some(), "{mode}: {l}");
        p.stop().await;
    }
    d.stop();
}

/// A daemon, an agent `bot` whose profile runs the upstream's tools and
/// asks anything else (a pin question), and `actiongate mcp proxy` in
/// front of [`UPSTREAM`] (tool `ok`) in `mode`; `env` for the daemon.
struct Proxied {
    d: Daemon,
    http: reqwest::Client,
    admin: String,
    agent: String,
    p: Proxy,
    _dir: tempfile::TempDir,
}

impl Proxied {
    async fn start(mode: &str, env: &[(&str, &str)]) -> Proxied {
        let dir = tempfile::tempdir().unwrap();
        let d = Daemon::start(dir.path(), env);
        let http = client();
        let admin = d.admin_key();
        let agent = agent_key(&http, &d.base, &admin, "bot").await;
        let profile = json!({"allow": ["tool:mcp__fs__(?s).*"], "ask": ["(?s).*"]});
        set_profile(&http, &d.base, &admin, "bot", profile).await;
        let script = UPSTREAM.replace(
            "mode = os.environ.get(\"UPSTREAM_MODE\", \"\")",
            &format!("mode = {mode:?}"),
        );
        let p = Proxy::start_with(dir.path(), &d.base, &agent, &["ok"], &script, &[]).await;
        Proxied {
            d,
            http,
            admin,
            agent,
            p,
            _dir: dir,
        }
    }

    async fn stop(self) {
        self.p.stop().await;
        self.d.stop();
    }
}

/// An upstream server that offers many new tools at once cannot fill the
/// agent's pending places with questions about them: at most five are
/// open at a time, the rest stay hidden and unasked, and the agent's own
/// calls go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_offering_many_new_tools_asks_about_five_at_a_time() {
    let mut x = Proxied::start(
        "grow",
        &[("ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT", "10")],
    )
    .await;
    let (http, base, admin) = (x.http.clone(), x.d.base.clone(), x.admin.clone());
    let p = &mut x.p;
    let first = p.request("tools/list", json!({})).await;
    assert_eq!(
        first["result"]["tools"].as_array().map(Vec::len),
        Some(1),
        "{first}"
    );
    for _ in 0..3 {
        let l = p.request("tools/list", json!({})).await;
        let names: Vec<&str> = l["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert_eq!(names, ["ok"], "{l}");
    }
    let pins = actions_of(&http, &base, &admin, "mcp-pin").await;
    assert_eq!(pins.len(), 5, "{pins:?}");
    assert!(pins.iter().all(|a| a["status"] == "pending"), "{pins:?}");
    let r = p.call("ok").await;
    assert_eq!(text_of(&r), "ran ok", "{r}");
    x.stop().await;
}

/// An upstream server that describes a tool anew in every listing keeps
/// one question about it open, not one per listing: each new question
/// withdraws the one before, so the agent's pending places and the
/// approvers' queue stay free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_definition_changed_at_every_listing_keeps_one_question_open() {
    let mut x = Proxied::start("vary", &[("ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT", "4")]).await;
    // The first listing pins the tool; each later one changes it.
    for _ in 0..8 {
        x.p.request("tools/list", json!({})).await;
    }
    let pins = actions_of(&x.http, &x.d.base, &x.admin, "mcp-pin").await;
    let pending: Vec<&Value> = pins.iter().filter(|a| a["status"] == "pending").collect();
    assert_eq!(pending.len(), 1, "{pins:?}");
    assert!(pins.len() >= 2, "{pins:?}");
    assert!(
        pins.iter()
            .all(|a| a["status"] == "pending" || a["status"] == "cancelled"),
        "{pins:?}"
    );
    // The agent's own requests still find a pending place.
    let (s, a) = call(
        &x.http,
        Method::POST,
        format!("{}/v1/actions", x.d.base),
        &x.agent,
        Some(json!({"tool": "bash", "detail": "make test"})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    x.stop().await;
}

/// A call the operator saw with its arguments reaches the upstream with
/// those arguments only: a client's `requestState` or `inputResponses`
/// (which an upstream could read as other arguments) are not forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_call_forwards_no_request_state_or_input_responses() {
    let mut x = Proxied::start("echo", &[]).await;
    x.p.request("tools/list", json!({})).await;
    let extra = json!({
        "name": "ok",
        "arguments": {"to": "alice@example.com"},
        "requestState": "state-from-the-client",
        "inputResponses": {"q1": {"action": "accept", "content": {"to": "mallory@example.com"}}},
    });
    let r = x.p.request("tools/call", extra).await;
    let mut got: Value = serde_json::from_str(&text_of(&r["result"])).expect("the params as JSON");
    // The proxy's own progress token for the forwarded call.
    got.as_object_mut().unwrap().remove("_meta");
    assert_eq!(
        got,
        json!({"name": "ok", "arguments": {"to": "alice@example.com"}}),
        "{r}"
    );
    x.stop().await;
}

/// A handler registration for `id` at `url`, attempts cut at `timeout`.
fn handler(id: &str, url: &str, timeout: &str) -> Value {
    json!({
        "id": id, "name": id, "url": url, "timeout": timeout,
        "permissions": [{"name": "use", "parameters_schema": {"type": "object"}}],
        "actions": [{"name": "go", "permission": "use", "params_schema": {"type": "object"}}],
    })
}

/// An executor that answers every delivery slowly (headers, then nothing
/// until the attempt's timeout) holds its own handler's room in flight;
/// it must not hold back every other handler's deliveries. With more of
/// its actions waiting than one dispatch pass looks at, another handler's
/// action was never looked at until the slow one's backlog drained.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_executor_does_not_stall_dispatch_to_other_executors() {
    use crate::common::raw_http::{After, RawServer, answer};
    let slow = RawServer::start(|_, _| {
        let head = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n".to_vec();
        (head, After::Stall(Duration::from_secs(120)))
    })
    .await;
    let fast = RawServer::start(|_, _| {
        let ok = answer("200 OK", &[("content-type", "application/json")], "{}");
        (ok, After::Close)
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let env = [("ACTIONGATE_DISPATCH__PER_HANDLER_MAX_IN_FLIGHT", "2")];
    let d = Daemon::start(dir.path(), &env);
    let http = client();
    let admin = d.admin_key();
    for (id, base) in [("slow", &slow.base), ("fast", &fast.base)] {
        let (s, h) = call(
            &http,
            Method::POST,
            format!("{}/v1/handlers", d.base),
            &admin,
            Some(handler(id, &format!("{base}/run"), "60s")),
        )
        .await;
        assert_eq!(s, 201, "{h}");
    }
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    // More of the slow handler's actions than a pass looks at (256).
    for _ in 0..300 {
        let (s, a) = call(
            &http,
            Method::POST,
            format!("{}/v1/actions", d.base),
            &agent,
            Some(json!({"handler": "slow", "action": "go", "params": {}})),
        )
        .await;
        assert_eq!(s, 201, "{a}");
    }
    let started = std::time::Instant::now();
    let (s, a) = call(
        &http,
        Method::POST,
        format!("{}/v1/actions?wait=15", d.base),
        &agent,
        Some(json!({"handler": "fast", "action": "go", "params": {}})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(
        a["status"],
        "completed",
        "after {:?}: {a}",
        started.elapsed()
    );
    d.stop();
}

/// CPU time (user and system) process `pid` has used, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name (which may hold spaces): state is
    // the first, utime the 12th and stime the 13th.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// While a handler has no room in flight, its retries that came due wait
/// for room: the dispatcher used to look again every millisecond until a
/// slow executor gave its room back, a fifth of a CPU for as long as that
/// took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_handler_with_retries_due_leaves_the_dispatcher_idle() {
    use crate::common::raw_http::{After, RawServer};
    let hang = RawServer::start(|_, _| (Vec::new(), After::Stall(Duration::from_secs(120)))).await;
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("ACTIONGATE_DISPATCH__PER_HANDLER_MAX_IN_FLIGHT", "2"),
        ("ACTIONGATE_DISPATCH__RETRY_SCHEDULE", "[\"1s\", \"2s\"]"),
    ];
    let d = Daemon::start(dir.path(), &env);
    let http = client();
    let admin = d.admin_key();
    let (s, h) = call(
        &http,
        Method::POST,
        format!("{}/v1/handlers", d.base),
        &admin,
        Some(handler("hang", &format!("{}/run", hang.base), "4s")),
    )
    .await;
    assert_eq!(s, 201, "{h}");
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let ask_and_approve = || async {
        let (s, a) = call(
            &http,
            Method::POST,
            format!("{}/v1/actions", d.base),
            &agent,
            Some(json!({"handler": "hang", "action": "go", "params": {}})),
        )
        .await;
        assert_eq!(s, 201, "{a}");
        let id = a["id"].as_str().unwrap();
        let (s, a) = call(
            &http,
            Method::POST,
            format!("{}/v1/actions/{id}/approve", d.base),
            &operator,
            Some(json!({})),
        )
        .await;
        assert_eq!(s, 200, "{a}");
    };
    for _ in 0..6 {
        ask_and_approve().await;
    }
    // After the first attempts time out (4 s), retries are due while the
    // handler's room (2) goes from one attempt to the next.
    tokio::time::sleep(Duration::from_millis(5500)).await;
    // Anything that wakes the dispatch loop then (another approval) finds
    // those retries due and the handler full.
    ask_and_approve().await;
    let before = cpu_ticks(d.pid());
    tokio::time::sleep(Duration::from_secs(4)).await;
    let used = cpu_ticks(d.pid()) - before;
    let (s, list) = call(
        &http,
        Method::GET,
        format!("{}/v1/actions?status=approved", d.base),
        &admin,
        None,
    )
    .await;
    assert_eq!(s, 200, "{list}");
    assert!(
        !list["items"].as_array().unwrap().is_empty(),
        "retries were still waiting for room while measured: {list}"
    );
    assert!(
        used < 20,
        "the daemon used {used} ticks (1/100 s) of CPU in 4 s with retries waiting for room"
    );
    d.stop();
}
