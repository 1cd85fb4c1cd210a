//! Black-box tests: what the daemon does with an executor's answer. A
//! redirect is never followed (a 303 would make the daemon GET any URL it
//! can reach and store the answer as the result; a 307 would re-send the
//! signed delivery elsewhere): it is a failed attempt recording its
//! `Location`, retried. A body cut short (closed or stalled before its
//! `content-length`) is a failed attempt too, never a result.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use serde_json::{Value, json};

use crate::common;
use common::daemon::{Daemon, agent_key, register_handler, set_profile};
use common::raw_http::{After, RawServer, answer};
use common::{call, client};

/// Three attempts, 200 ms apart; one second per attempt.
const ENV: &[(&str, &str)] = &[(
    "ACTIONGATE_DISPATCH__RETRY_SCHEDULE",
    "[\"200ms\", \"200ms\"]",
)];

fn handler(url: &str) -> Value {
    json!({
        "id": "files", "name": "Files", "url": url, "timeout": "1s",
        "permissions": [{"name": "fs.write", "parameters_schema": {"type": "object"}}],
        "actions": [{"name": "write", "permission": "fs.write",
            "params_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]
    })
}

/// A whole `200 OK` answer with a JSON `body`.
fn ok_json(body: &str) -> Vec<u8> {
    answer("200 OK", &[("content-type", "application/json")], body)
}

/// A daemon whose agent `bot` (open profile) has the handler `files` at
/// `url`; the agent's key.
async fn daemon_with_handler(dir: &std::path::Path, url: &str) -> (Daemon, String) {
    let d = Daemon::start(dir, ENV);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    register_handler(&http, &d.base, &admin, handler(url)).await;
    (d, agent)
}

/// Requests the handler action and waits until it settles.
async fn run(d: &Daemon, agent: &str) -> Value {
    let (s, a) = call(
        &client(),
        reqwest::Method::POST,
        format!("{}/v1/actions?wait=30", d.base),
        agent,
        Some(json!({"handler": "files", "action": "write", "params": {"path": "/x"}})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert!(
        a["status"] == "completed" || a["status"] == "failed",
        "not settled: {a}"
    );
    a
}

async fn a_redirect_is_a_failed_attempt(status: &str) {
    // What only the daemon's side of the network should reach.
    let internal =
        RawServer::start(|_, _| (ok_json(r#"{"internal":"secret"}"#), After::Close)).await;
    let target = format!("{}/internal", internal.base);
    let loc = target.clone();
    let status = status.to_owned();
    let executor = RawServer::start(move |_, _| {
        (
            answer(&status, &[("location", loc.as_str())], ""),
            After::Close,
        )
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (d, agent) = daemon_with_handler(dir.path(), &format!("{}/hook", executor.base)).await;
    let a = run(&d, &agent).await;

    assert_eq!(a["status"], "failed", "{a}");
    assert!(
        !a.to_string().contains("secret"),
        "the redirect's answer reached the action: {a}"
    );
    let attempts = a["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3, "retried like a 5xx: {a}");
    let code: u64 = a_code(&a);
    for at in attempts {
        assert_eq!(at["status_code"].as_u64(), Some(code), "{at}");
        let err = at["error"].as_str().unwrap();
        assert!(
            err.contains(&target) && err.contains("not followed"),
            "{err}"
        );
    }
    assert_eq!(executor.requests().len(), 3);
    assert!(
        internal.requests().is_empty(),
        "the daemon followed the redirect: {:?}",
        internal.requests()
    );
    d.stop();
}

fn a_code(a: &Value) -> u64 {
    a["attempts"][0]["status_code"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_303_from_an_executor_is_not_followed_and_fails_the_attempt() {
    a_redirect_is_a_failed_attempt("303 See Other").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_307_from_an_executor_does_not_resend_the_signed_delivery() {
    a_redirect_is_a_failed_attempt("307 Temporary Redirect").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_cut_short_is_a_failed_attempt_that_is_retried() {
    // Attempt 1: 10 of 100 bytes, then the connection closes. Attempt 2:
    // 10 bytes, then nothing until the attempt's timeout. Attempt 3: whole.
    let executor = RawServer::start(|n, _| {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"partial\"";
        match n {
            1 => (head.as_bytes().to_vec(), After::Close),
            2 => (
                head.as_bytes().to_vec(),
                After::Stall(Duration::from_secs(5)),
            ),
            _ => (
                ok_json(r#"{"whole":true}"#),
                After::Close,
            ),
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (d, agent) = daemon_with_handler(dir.path(), &format!("{}/hook", executor.base)).await;
    let a = run(&d, &agent).await;

    assert_eq!(a["status"], "completed", "{a}");
    assert_eq!(a["outcome"]["result"], json!({"whole": true}), "{a}");
    let attempts = a["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3, "{a}");
    let e1 = attempts[0]["error"].as_str().unwrap_or_default();
    assert!(e1.contains("cut short"), "attempt 1: {e1}");
    let e2 = attempts[1]["error"].as_str().unwrap_or_default();
    assert!(e2.contains("timed out"), "attempt 2: {e2}");
    assert!(attempts[2]["error"].is_null(), "{a}");
    assert!(!a.to_string().contains("partial"), "{a}");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_closed_unanswered_is_sent_again_within_the_attempt() {
    // The first connection is closed as the delivery arrives (an executor
    // closing kept-alive connections at its cap): no answer at all. The
    // second answers.
    let executor = RawServer::start(|n, _| match n {
        1 => (Vec::new(), After::Close),
        _ => (ok_json(r#"{"ok":true}"#), After::Close),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (d, agent) = daemon_with_handler(dir.path(), &format!("{}/hook", executor.base)).await;
    let a = run(&d, &agent).await;
    assert_eq!(a["status"], "completed", "{a}");
    assert_eq!(a["attempts"].as_array().unwrap().len(), 1, "{a}");
    // The same delivery both times: one webhook-id, one attempt number.
    let got = executor.requests();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"));
    assert_eq!(got[0].json()["attempt"], got[1].json()["attempt"]);
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_always_closes_unanswered_fails_each_attempt_after_two_sends() {
    let executor = RawServer::start(|_, _| (Vec::new(), After::Close)).await;
    let dir = tempfile::tempdir().unwrap();
    let (d, agent) = daemon_with_handler(dir.path(), &format!("{}/hook", executor.base)).await;
    let a = run(&d, &agent).await;
    assert_eq!(a["status"], "failed", "{a}");
    let attempts = a["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3, "{a}");
    let e = attempts[0]["error"].as_str().unwrap_or_default();
    assert!(e.contains("closed before message completed"), "{e}");
    // Each attempt was sent twice (once more on a new connection), never
    // more.
    let got = executor.requests();
    for n in 1..=3 {
        let sends = got.iter().filter(|r| r.json()["attempt"] == n).count();
        assert_eq!(sends, 2, "attempt {n} was sent {sends} times");
    }
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_and_subscription_urls_keep_to_the_allowed_networks() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    // By default: no link-local addresses (cloud metadata lives there).
    let (s, p) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/handlers", d.base),
        &admin,
        Some(handler("http://169.254.169.254/latest/meta-data")),
    )
    .await;
    assert_eq!(s, 422, "{p}");
    assert_eq!(p["errors"][0]["field"], "url", "{p}");
    let (s, p) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/subscriptions", d.base),
        &admin,
        Some(json!({"url": "http://[fe80::1]/hook", "types": ["*"]})),
    )
    .await;
    assert_eq!(s, 422, "{p}");
    assert_eq!(p["errors"][0]["field"], "url", "{p}");
    d.stop();
}

/// Every spelling of a metadata address is the address: decimal, octal
/// and hex IPv4, IPv4 inside IPv6 (mapped, compatible, NAT64, 6to4),
/// 0.0.0.0; and the clouds' metadata services outside 169.254/16 (AWS's
/// IPv6 endpoint, Alibaba's) are refused like it by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_of_a_metadata_address_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    for url in [
        "http://2852039166/latest",
        "http://0251.0376.0251.0376/latest",
        "http://0xa9.0xfe.0xa9.0xfe/latest",
        "http://169.254.43518/latest",
        "http://[::ffff:169.254.169.254]/latest",
        "http://[::ffff:a9fe:a9fe]/latest",
        "http://[::a9fe:a9fe]/latest",
        "http://[64:ff9b::a9fe:a9fe]/latest",
        "http://[2002:a9fe:a9fe::1]/latest",
        "http://0.0.0.0/latest",
        "http://0/latest",
        "http://[::]/latest",
        "http://[fd00:ec2::254]/latest",
        "http://100.100.100.200/latest",
    ] {
        let (s, p) = call(
            &http,
            reqwest::Method::POST,
            format!("{}/v1/handlers", d.base),
            &admin,
            Some(handler(url)),
        )
        .await;
        assert_eq!(s, 422, "{url}: {p}");
        let (s, p) = call(
            &http,
            reqwest::Method::POST,
            format!("{}/v1/subscriptions", d.base),
            &admin,
            Some(json!({"url": url, "types": ["*"]})),
        )
        .await;
        assert_eq!(s, 422, "{url}: {p}");
    }
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_resolves_outside_the_allowed_networks_is_never_contacted() {
    let executor = RawServer::start(|_, _| (ok_json("{}"), After::Close)).await;
    let port = executor.base.rsplit(':').next().unwrap().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let mut env = ENV.to_vec();
    env.push(("ACTIONGATE_OUTBOUND__ALLOWED_NETWORKS", "[\"10.0.0.0/8\"]"));
    let d = Daemon::start(dir.path(), &env);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    // A loopback address is refused when it is registered...
    let (s, p) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/handlers", d.base),
        &admin,
        Some(handler(&format!("{}/hook", executor.base))),
    )
    .await;
    assert_eq!(s, 422, "{p}");
    // ...and a name is checked by what it resolves to, at every connection.
    register_handler(
        &http,
        &d.base,
        &admin,
        handler(&format!("http://localhost:{port}/hook")),
    )
    .await;
    let a = run(&d, &agent).await;
    assert_eq!(a["status"], "failed", "{a}");
    let err = a["attempts"][0]["error"].as_str().unwrap();
    assert!(err.contains("outbound.allowed_networks"), "{err}");
    assert!(executor.requests().is_empty(), "the executor was contacted");
    d.stop();
}

/// A proxy named in the daemon's environment carries no delivery: the
/// daemon connects directly, so the address checked is the executor's,
/// never the proxy's (a loopback proxy would otherwise take a delivery to
/// any name past `allowed_networks`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_in_the_environment_carries_no_delivery_past_the_allowed_networks() {
    let proxy = RawServer::start(|_, _| (ok_json("{}"), After::Close)).await;
    let dir = tempfile::tempdir().unwrap();
    let mut env = ENV.to_vec();
    env.push(("ACTIONGATE_OUTBOUND__ALLOWED_NETWORKS", "[\"10.0.0.0/8\"]"));
    for name in ["HTTP_PROXY", "http_proxy", "ALL_PROXY"] {
        env.push((name, proxy.base.as_str()));
    }
    let d = Daemon::start(dir.path(), &env);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    register_handler(&http, &d.base, &admin, handler("http://localhost:9/hook")).await;
    let a = run(&d, &agent).await;
    assert_eq!(a["status"], "failed", "{a}");
    let err = a["attempts"][0]["error"].as_str().unwrap();
    assert!(err.contains("outbound.allowed_networks"), "{err}");
    assert!(proxy.requests().is_empty(), "the proxy carried a delivery");
    d.stop();
}

/// A notification receiver that answers a redirect: the event is never
/// re-sent (signed) to the `Location`, and the attempt is a failure
/// recording the status and where it pointed, retried like a 5xx.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_from_a_notification_receiver_is_not_followed_and_is_retried() {
    let internal = RawServer::start(|_, _| (ok_json("{}"), After::Close)).await;
    let target = format!("{}/internal", internal.base);
    let loc = target.clone();
    let receiver = RawServer::start(move |_, _| {
        (
            answer("307 Temporary Redirect", &[("location", loc.as_str())], ""),
            After::Close,
        )
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[
            ("ACTIONGATE_WEBHOOKS__BACKOFF_MIN", "100ms"),
            ("ACTIONGATE_WEBHOOKS__BACKOFF_MAX", "200ms"),
        ],
    );
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", json!("guarded")).await;
    let (s, sub) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/subscriptions", d.base),
        &admin,
        Some(json!({"url": format!("{}/hook", receiver.base), "types": ["action.enqueued"]})),
    )
    .await;
    assert_eq!(s, 201, "{sub}");
    let sub_id = sub["id"].as_str().unwrap().to_owned();
    let (s, a) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions", d.base),
        &agent,
        Some(json!({"tool": "bash", "detail": "make"})),
    )
    .await;
    assert_eq!(s, 201, "{a}");

    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let delivery = loop {
        let (s, page) = call(
            &http,
            reqwest::Method::GET,
            format!("{}/v1/subscriptions/{sub_id}/deliveries", d.base),
            &admin,
            None,
        )
        .await;
        assert_eq!(s, 200, "{page}");
        let first = page["items"][0].clone();
        if first["attempts"].as_i64().unwrap_or(0) >= 3 {
            break first;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the redirect was not retried like a 5xx: {page}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let err = delivery["last_error"].as_str().unwrap_or_default();
    assert!(
        err.contains("307") && err.contains(&target) && err.contains("not followed"),
        "{delivery}"
    );
    assert!(receiver.requests().len() >= 3);
    assert!(
        internal.requests().is_empty(),
        "the daemon followed the redirect: {:?}",
        internal.requests()
    );
    d.stop();
}

/// What an executor says is kept within bounds, however much it says: a
/// redirect's `Location` is named cut to 512 characters, and a refusal's
/// `error` to 4,096, in the attempt and in the outcome (each
/// `action.started` event carries every attempt so far).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executors_words_are_kept_within_bounds() {
    let long = format!("http://127.0.0.1:9/{}", "l".repeat(50_000));
    let said = "e".repeat(50_000);
    let executor = RawServer::start(move |n, _| {
        let body = json!({"error": said}).to_string();
        let a = if n == 1 {
            answer("307 Temporary Redirect", &[("location", long.as_str())], "")
        } else {
            answer(
                "422 Unprocessable Entity",
                &[("content-type", "application/json")],
                &body,
            )
        };
        (a, After::Close)
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (d, agent) = daemon_with_handler(dir.path(), &format!("{}/hook", executor.base)).await;
    let a = run(&d, &agent).await;
    assert_eq!(a["status"], "failed", "{a}");
    let attempts = a["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{a}");
    let redirect = attempts[0]["error"].as_str().unwrap();
    assert!(redirect.contains("not followed"), "{redirect}");
    assert!(
        redirect.chars().count() < 700,
        "{} characters",
        redirect.len()
    );
    let refused = attempts[1]["error"].as_str().unwrap();
    assert_eq!(refused.chars().count(), 4097, "cut to 4,096 and `…`");
    let outcome = a["outcome"]["error"].as_str().unwrap();
    assert_eq!(outcome.chars().count(), 4097);
    d.stop();
}
