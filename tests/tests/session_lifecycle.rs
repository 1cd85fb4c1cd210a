//! Black-box tests of what ends or marks a session (issue 33,
//! docs/sessions.md): a human's approval of an untrusted read taints it as
//! an allow does; ending it, by hand or by going idle for
//! `sessions.idle_timeout`, revokes its grants with `grant.revoked` events.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, Keyed, set_profile};
use crate::common::{call, client};
use crate::sessions::post;

/// `fetch` asks and reads untrusted content; `deploy` is allowed, and
/// guarded.
fn profile() -> Value {
    json!({
        "allow": ["tool:deploy:.*"],
        "ask": ["tool:fetch:.*"],
        "taints": ["tool:fetch:.*"],
        "guarded": ["tool:deploy:.*"],
    })
}

async fn setup(env: &[(&str, &str)]) -> (tempfile::TempDir, Daemon, String, String) {
    let k = Keyed::start(env).await;
    set_profile(&k.http, &k.d.base, &k.admin, "bot", profile()).await;
    (k.dir, k.d, k.agent, k.operator)
}

/// Requests `tool`/`detail` in `session`: the action.
async fn request(base: &str, agent: &str, tool: &str, detail: &str, session: &str) -> Value {
    let (s, a) = post(
        &client(),
        format!("{base}/v1/actions"),
        agent,
        json!({"tool": tool, "detail": detail, "session": session}),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_read_a_human_or_a_grant_approved_taints_its_session() {
    let (_dir, d, agent, operator) = setup(&[]).await;
    let http = client();
    // Approved by a human.
    assert_eq!(
        request(&d.base, &agent, "deploy", "web", "one").await["status"],
        "approved"
    );
    let fetch = request(&d.base, &agent, "fetch", "https://example.com", "one").await;
    assert_eq!(fetch["status"], "pending", "{fetch}");
    let id = fetch["id"].as_str().unwrap();
    let (s, a) = post(
        &http,
        format!("{}/v1/actions/{id}/approve", d.base),
        &operator,
        json!({}),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "approved", "{a}");
    let after = request(&d.base, &agent, "deploy", "web", "one").await;
    assert_eq!(after["status"], "pending", "{after}");
    let reason = after["decision"]["reason"].as_str().unwrap();
    assert!(reason.contains("tainted") && reason.contains(id), "{after}");
    let (s, session) = call(
        &http,
        Method::GET,
        format!("{}/v1/sessions/one", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{session}");
    assert_eq!(session["tainted_by"], id, "{session}");

    // Settled by a grant made while it waited.
    let fetch = request(&d.base, &agent, "fetch", "https://example.org", "two").await;
    assert_eq!(fetch["status"], "pending", "{fetch}");
    let (s, g) = post(
        &http,
        format!("{}/v1/grants", d.base),
        &operator,
        json!({"agent": "bot", "tool": "fetch", "pattern": "https://example\\.org", "expires": "1h"}),
    )
    .await;
    assert_eq!(s, 201, "{g}");
    assert_eq!(g["approved_actions"], json!([fetch["id"]]), "{g}");
    assert_eq!(
        request(&d.base, &agent, "deploy", "web", "two").await["status"],
        "pending"
    );
    // A fresh session is not tainted.
    assert_eq!(
        request(&d.base, &agent, "deploy", "web", "three").await["status"],
        "approved"
    );
    d.stop();
}

/// Asks approval for one `deploy` step in `session` and approves it: the
/// id of the grant it made.
async fn approved_step(base: &str, agent: &str, operator: &str, session: &str) -> String {
    let http = client();
    let (s, plan) = post(
        &http,
        format!("{base}/v1/plans"),
        agent,
        json!({"session": session, "steps": [{"tool": "fetch", "detail": "https://example.net"}]}),
    )
    .await;
    assert_eq!(s, 201, "{plan}");
    let id = plan["id"].as_str().unwrap();
    let (s, plan) = post(
        &http,
        format!("{base}/v1/plans/{id}/approve"),
        operator,
        json!({}),
    )
    .await;
    assert_eq!(s, 200, "{plan}");
    plan["steps"][0]["grants"][0].as_str().unwrap().to_owned()
}

/// The `grant.revoked` event lines of the audit export naming `grant`.
async fn revoked_events(base: &str, operator: &str, grant: &str) -> usize {
    crate::audit::export(&client(), base, operator)
        .await
        .lines()
        .filter(|l| l.contains("grant.revoked") && l.contains(grant))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ending_a_session_revokes_its_grants_with_grant_revoked_events() {
    let (_dir, d, agent, operator) = setup(&[]).await;
    let grant = approved_step(&d.base, &agent, &operator, "s").await;
    assert_eq!(revoked_events(&d.base, &operator, &grant).await, 0);
    let (s, ended) = post(
        &client(),
        format!("{}/v1/sessions/s/end", d.base),
        &agent,
        json!({}),
    )
    .await;
    assert_eq!(s, 200, "{ended}");
    // Who ended it: the agent's key.
    assert!(
        ended["ended_by"]
            .as_str()
            .is_some_and(|b| b.starts_with("key:")),
        "{ended}"
    );
    assert_eq!(revoked_events(&d.base, &operator, &grant).await, 1);
    let (s, g) = call(
        &client(),
        Method::GET,
        format!("{}/v1/grants/{grant}", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{g}");
    assert!(g["revoked_at"].is_string(), "{g}");
    // Ending it again revokes nothing more.
    post(
        &client(),
        format!("{}/v1/sessions/s/end", d.base),
        &agent,
        json!({}),
    )
    .await;
    assert_eq!(revoked_events(&d.base, &operator, &grant).await, 1);
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_idle_for_the_configured_timeout_ends_and_its_grants_are_revoked() {
    let (_dir, d, agent, operator) = setup(&[("ACTIONGATE_SESSIONS__IDLE_TIMEOUT", "2s")]).await;
    let grant = approved_step(&d.base, &agent, &operator, "idle").await;
    // The sweeper ends it, without another request in the session.
    let mut revoked = 0;
    for _ in 0..40 {
        revoked = revoked_events(&d.base, &operator, &grant).await;
        if revoked > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert_eq!(
        revoked, 1,
        "no grant.revoked within 10s of a 2s idle timeout"
    );
    let (s, session) = call(
        &client(),
        Method::GET,
        format!("{}/v1/sessions/idle", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{session}");
    assert_eq!(session["status"], "ended", "{session}");
    assert_eq!(session["ended_by"], "idle", "{session}");
    // The step's grant is gone: the same read asks again.
    assert_eq!(
        request(&d.base, &agent, "fetch", "https://example.net", "idle").await["status"],
        "pending"
    );
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_idle_timeout_stops_the_daemon_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(crate::common::binary("actiongate"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env("ACTIONGATE_SESSIONS__IDLE_TIMEOUT", "0s")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sessions.idle_timeout"), "{err}");
}

/// A request refused for its own fields (a bad tool name, a detail too
/// long, a bad timeout) changes nothing: it does not make another agent's
/// session its own, nor reopen one that ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_claims_and_reopens_no_session() {
    let k = Keyed::start(&[]).await;
    set_profile(&k.http, &k.d.base, &k.admin, "bot", profile()).await;
    let other = crate::common::daemon::agent_key(&k.http, &k.d.base, &k.admin, "other").await;
    let http = client();
    let long = "x".repeat(70_000);
    crate::common::daemon::register_handler(
        &k.http,
        &k.d.base,
        &k.admin,
        crate::common::daemon::files_handler(),
    )
    .await;
    for (bad, status) in [
        (
            json!({"tool": "no spaces", "detail": "x", "session": "shared"}),
            422,
        ),
        (
            json!({"tool": "deploy", "detail": long, "session": "shared"}),
            422,
        ),
        (
            json!({"tool": "deploy", "detail": "x", "timeout": "forever", "session": "shared"}),
            422,
        ),
        (
            json!({"handler": "nobody", "action": "write", "params": {}, "session": "shared"}),
            404,
        ),
        (
            json!({"handler": "files", "action": "nothing", "params": {}, "session": "shared"}),
            404,
        ),
        (
            json!({"handler": "files", "action": "write", "params": [1], "session": "shared"}),
            422,
        ),
    ] {
        let (s, e) = post(&http, format!("{}/v1/actions", k.d.base), &other, bad).await;
        assert_eq!(s, status, "{e}");
    }
    // The session is still nobody's: the bot may name it.
    request(&k.d.base, &k.agent, "deploy", "prod", "shared").await;
    // Ended, it stays ended after a refused request.
    let (s, e) = call(
        &http,
        Method::POST,
        format!("{}/v1/sessions/shared/end", k.d.base),
        &k.agent,
        None,
    )
    .await;
    assert_eq!(s, 200, "{e}");
    let bad = json!({"tool": "deploy", "detail": "x", "timeout": "forever", "session": "shared"});
    let (s, e) = post(&http, format!("{}/v1/actions", k.d.base), &k.agent, bad).await;
    assert_eq!(s, 422, "{e}");
    let (s, got) = call(
        &http,
        Method::GET,
        format!("{}/v1/sessions/shared", k.d.base),
        &k.agent,
        None,
    )
    .await;
    assert_eq!(s, 200, "{got}");
    assert_eq!(got["status"], "ended", "{got}");
}
