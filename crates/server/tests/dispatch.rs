//! Dispatch to executors: a test receiver in this process plays the
//! executor and records every webhook it gets.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxStatus};
use axum::response::{IntoResponse, Response};
use common::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// One webhook as received.
#[derive(Clone, Debug)]
struct Received {
    headers: HeaderMap,
    body: Vec<u8>,
    at: Instant,
}

impl Received {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
    fn header(&self, name: &str) -> String {
        self.headers[name].to_str().unwrap().to_owned()
    }
}

type Script = Arc<dyn Fn(usize, &Value) -> Response + Send + Sync>;

#[derive(Clone)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    script: Script,
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> Response {
    let n = {
        let mut got = r.got.lock().unwrap();
        got.push(Received {
            headers,
            body: body.to_vec(),
            at: Instant::now(),
        });
        got.len()
    };
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (r.script)(n, &v)
}

/// Starts a receiver answering with `script(call_number, body)`; its URL.
async fn receiver(
    script: impl Fn(usize, &Value) -> Response + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<Received>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let r = Receiver {
        got: got.clone(),
        script: Arc::new(script),
    };
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(r);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, got)
}

fn handler(url: &str) -> Value {
    json!({
        "id": "files", "name": "Files", "url": url, "timeout": "1s",
        "permissions": [{"name": "fs.write", "parameters_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
        "actions": [{"name": "write", "params_schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path"]},
            "permission": "fs.write", "scope": {"path": "/path"}, "detail": "write {path}"}]
    })
}

async fn app_with(url: &str) -> (TestApp, String) {
    app_with_async_timeout(url, "1s").await
}

async fn app_with_async_timeout(url: &str, async_timeout: &str) -> (TestApp, String) {
    let app = TestApp::spawn_with(|s| {
        s.dispatch.retry_schedule = vec!["100ms".parse().unwrap(); 2];
        s.dispatch.async_result_timeout = async_timeout.parse().unwrap();
    })
    .await;
    app.profile("agent-1", json!("open")).await;
    let (s, body) = app
        .call(
            Method::POST,
            "/v1/handlers",
            Some(&app.admin),
            Some(handler(url)),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let secret = body["secret"].as_str().unwrap().to_owned();
    (app, secret)
}

/// Requests an allowed handler action and long-polls until it settles.
async fn run_action(app: &TestApp, path: &str) -> Value {
    let (s, a) = app
        .call(Method::POST, "/v1/actions?wait=20", Some(&app.agent), Some(json!({"handler": "files", "action": "write", "params": {"path": path, "content": "hi"}})))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    a
}

fn verify(secret: &str, r: &Received) {
    let wh = standardwebhooks::Webhook::new(secret).unwrap();
    wh.verify(&r.body, &r.headers).expect("signature verifies");
}

#[tokio::test]
async fn completed_with_the_body_as_result_and_a_signed_webhook() {
    let (url, got) =
        receiver(|_, _| (AxStatus::OK, axum::Json(json!({"written": 2}))).into_response()).await;
    let (app, secret) = app_with(&url).await;
    let a = run_action(&app, "/tmp/x").await;
    assert_eq!(a["status"], "completed", "{a}");
    assert_eq!(a["outcome"]["result"], json!({"written": 2}));
    assert_eq!(a["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(a["attempts"][0]["status_code"], 200);
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    verify(&secret, r);
    assert_eq!(r.header("webhook-id"), a["id"].as_str().unwrap());
    let body = r.json();
    assert_eq!(body["type"], "action.execute");
    assert_eq!(body["action_id"], a["id"]);
    assert_eq!(body["handler"], "files");
    assert_eq!(body["action"], "write");
    assert_eq!(body["params"], json!({"path": "/tmp/x", "content": "hi"}));
    assert_eq!(body["agent"], "agent-1");
    assert_eq!(body["attempt"], 1);
    app.stop().await;
}

#[tokio::test]
async fn a_4xx_fails_without_retry() {
    let (url, got) = receiver(|_, _| {
        (
            AxStatus::UNPROCESSABLE_ENTITY,
            axum::Json(json!({"error": "path escapes the root"})),
        )
            .into_response()
    })
    .await;
    let (app, _) = app_with(&url).await;
    let a = run_action(&app, "../x").await;
    assert_eq!(a["status"], "failed");
    assert_eq!(a["outcome"]["error"], "path escapes the root");
    assert_eq!(a["attempts"].as_array().unwrap().len(), 1);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(got.lock().unwrap().len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn a_flaky_executor_succeeds_on_attempt_three_with_the_same_webhook_id() {
    let (url, got) = receiver(|n, _| {
        if n < 3 {
            AxStatus::SERVICE_UNAVAILABLE.into_response()
        } else {
            (AxStatus::OK, axum::Json(json!({"ok": true}))).into_response()
        }
    })
    .await;
    let (app, _) = app_with(&url).await;
    let a = run_action(&app, "/f").await;
    assert_eq!(a["status"], "completed", "{a}");
    let attempts = a["attempts"].as_array().unwrap();
    assert_eq!(
        attempts
            .iter()
            .map(|x| x["status_code"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [503, 503, 200]
    );
    let got = got.lock().unwrap().clone();
    let ids: Vec<String> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert!(
        ids.iter().all(|i| i == a["id"].as_str().unwrap()),
        "{ids:?}"
    );
    let nums: Vec<i64> = got
        .iter()
        .map(|r| r.json()["attempt"].as_i64().unwrap())
        .collect();
    assert_eq!(nums, [1, 2, 3]);
    app.stop().await;
}

#[tokio::test]
async fn an_executor_that_never_answers_times_out_retries_and_fails() {
    let (url, got) = receiver(|_, _| {
        std::thread::sleep(Duration::from_millis(1500));
        AxStatus::OK.into_response()
    })
    .await;
    let (app, _) = app_with(&url).await;
    let a = run_action(&app, "/slow").await;
    assert_eq!(a["status"], "failed", "{a}");
    let attempts = a["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3);
    assert!(
        attempts
            .iter()
            .all(|x| x["error"].as_str().unwrap().contains("timed out")),
        "{attempts:?}"
    );
    assert!(
        a["outcome"]["error"]
            .as_str()
            .unwrap()
            .contains("gave up after 3 attempts")
    );
    assert_eq!(got.lock().unwrap().len(), 3);
    app.stop().await;
}

#[tokio::test]
async fn refused_connections_retry_then_fail() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (app, _) = app_with(&format!("http://127.0.0.1:{port}/hook")).await;
    let a = run_action(&app, "/nobody").await;
    assert_eq!(a["status"], "failed");
    assert_eq!(a["attempts"].as_array().unwrap().len(), 3);
    app.stop().await;
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let (url, got) = receiver(|n, _| {
        if n == 1 {
            (AxStatus::TOO_MANY_REQUESTS, [("retry-after", "1")]).into_response()
        } else {
            AxStatus::OK.into_response()
        }
    })
    .await;
    let (app, _) = app_with(&url).await;
    let a = run_action(&app, "/r").await;
    assert_eq!(a["status"], "completed");
    let got = got.lock().unwrap().clone();
    assert!(got[1].at.duration_since(got[0].at) >= Duration::from_millis(950));
    app.stop().await;
}

fn signed_result(
    secret: &str,
    id: &str,
    webhook_id: &str,
    body: &Value,
) -> (String, Vec<(String, String)>) {
    let text = body.to_string();
    let ts = chrono::Utc::now().timestamp();
    let sig = standardwebhooks::Webhook::new(secret)
        .unwrap()
        .sign(webhook_id, ts, text.as_bytes())
        .unwrap();
    let _ = id;
    (
        text,
        vec![
            ("webhook-id".into(), webhook_id.into()),
            ("webhook-timestamp".into(), ts.to_string()),
            ("webhook-signature".into(), sig),
        ],
    )
}

async fn post_result(
    app: &TestApp,
    id: &str,
    text: String,
    headers: Vec<(String, String)>,
) -> (StatusCode, Value) {
    let mut req = app
        .client
        .post(format!("{}/v1/actions/{id}/result", app.base))
        .header("content-type", "application/json")
        .body(text);
    for (k, v) in headers {
        req = req.header(k, v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn accepted_202_then_a_signed_result_completes_it() {
    let (url, _got) = receiver(|_, _| AxStatus::ACCEPTED.into_response()).await;
    let (app, secret) = app_with_async_timeout(&url, "5m").await;
    let (_, a) = app
        .call(
            Method::POST,
            "/v1/actions?wait=1",
            Some(&app.agent),
            Some(json!({"handler": "files", "action": "write", "params": {"path": "/a"}})),
        )
        .await;
    let id = a["id"].as_str().unwrap().to_owned();
    assert_eq!(a["status"], "running", "{a}");
    // Bound to its action by naming it in the signed body.
    let body =
        json!({"status": "completed", "result": {"bytes": 5}, "attempt": 1, "action_id": id});
    // Forged: signed with another secret.
    let (text, headers) = signed_result(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        &id,
        "res-1",
        &body,
    );
    assert_eq!(
        post_result(&app, &id, text, headers).await.0,
        StatusCode::UNAUTHORIZED
    );
    // Stale: a timestamp from ten minutes ago.
    let text = body.to_string();
    let ts = chrono::Utc::now().timestamp() - 600;
    let sig = standardwebhooks::Webhook::new(&secret)
        .unwrap()
        .sign("res-0", ts, text.as_bytes())
        .unwrap();
    let stale = vec![
        ("webhook-id".into(), "res-0".into()),
        ("webhook-timestamp".into(), ts.to_string()),
        ("webhook-signature".into(), sig),
    ];
    assert_eq!(
        post_result(&app, &id, text, stale).await.0,
        StatusCode::UNAUTHORIZED
    );
    // A superseded attempt is refused.
    let (text, headers) = signed_result(
        &secret,
        &id,
        "res-2",
        &json!({"status": "completed", "attempt": 7, "action_id": id}),
    );
    assert_eq!(
        post_result(&app, &id, text, headers).await.0,
        StatusCode::CONFLICT
    );
    // The real one.
    let (text, headers) = signed_result(&secret, &id, "res-3", &body);
    let (s, done) = post_result(&app, &id, text.clone(), headers.clone()).await;
    assert_eq!(s, StatusCode::OK, "{done}");
    assert_eq!(done["status"], "completed");
    assert_eq!(done["outcome"]["result"]["bytes"], 5);
    // Replayed: the same webhook-id again.
    assert_eq!(
        post_result(&app, &id, text, headers).await.0,
        StatusCode::UNAUTHORIZED
    );
    // A new id for a settled action: conflict.
    let (text, headers) = signed_result(&secret, &id, "res-4", &body);
    assert_eq!(
        post_result(&app, &id, text, headers).await.0,
        StatusCode::CONFLICT
    );
    app.stop().await;
}

#[tokio::test]
async fn a_late_result_of_an_earlier_attempt_settles_the_action() {
    // The executor accepted attempt 1 with 202 and is still running it when
    // attempt 2 arrives (the lease lapsed, or the daemon restarted). It
    // deduplicates by webhook-id, so it answers 202 again and posts the
    // one result it has, for attempt 1: that result is the action's.
    let (url, got) = receiver(|_, _| AxStatus::ACCEPTED.into_response()).await;
    let (app, secret) = app_with_async_timeout(&url, "2s").await;
    let (_, a) = app
        .call(
            Method::POST,
            "/v1/actions?wait=1",
            Some(&app.agent),
            Some(json!({"handler": "files", "action": "write", "params": {"path": "/late"}})),
        )
        .await;
    let id = a["id"].as_str().unwrap().to_owned();
    let until = Instant::now() + Duration::from_secs(20);
    while got.lock().unwrap().len() < 2 {
        assert!(Instant::now() < until, "no second attempt");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let body = json!({"status": "completed", "result": {"late": true}, "attempt": 1});
    let (text, headers) = signed_result(&secret, &id, &format!("res_{id}_1"), &body);
    let (s, done) = post_result(&app, &id, text, headers).await;
    assert_eq!(s, StatusCode::OK, "{done}");
    assert_eq!(done["status"], "completed");
    assert_eq!(done["outcome"]["result"]["late"], true);
    // An attempt that was never sent is still refused.
    let (_, b) = app
        .call(
            Method::POST,
            "/v1/actions?wait=1",
            Some(&app.agent),
            Some(json!({"handler": "files", "action": "write", "params": {"path": "/later"}})),
        )
        .await;
    let bid = b["id"].as_str().unwrap().to_owned();
    let (text, headers) = signed_result(
        &secret,
        &bid,
        &format!("res_{bid}_2"),
        &json!({"status": "completed", "attempt": 2}),
    );
    assert_eq!(
        post_result(&app, &bid, text, headers).await.0,
        StatusCode::CONFLICT
    );
    app.stop().await;
}

// Multi-threaded: the receiver blocks its worker until the result is in
// (`block_in_place` needs this runtime).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_result_that_beats_its_own_202_still_leaves_the_attempt_in_the_log() {
    // A fast executor posts its result before the daemon has read its 202.
    type Target = Arc<Mutex<Option<(String, String)>>>;
    let target: Target = Arc::default();
    let t = target.clone();
    let (url, _got) = receiver(move |_, v| {
        let (base, secret) = t.lock().unwrap().clone().unwrap();
        let id = v["action_id"].as_str().unwrap().to_owned();
        let body =
            json!({"status": "completed", "result": {"fast": true}, "attempt": v["attempt"]});
        let (text, headers) = signed_result(&secret, &id, &format!("res_{id}"), &body);
        // Bounded, and checked by the test through the action's outcome:
        // a panic here would only look like a failed delivery to the daemon.
        // `block_in_place`: the daemon runs in this runtime, and a task
        // waiting in this worker's LIFO slot (which no other worker steals)
        // would wait for the join, and the join for it, until the timeout.
        let _ = tokio::task::block_in_place(|| {
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let mut req = reqwest::Client::new()
                        .post(format!("{base}/v1/actions/{id}/result"))
                        .timeout(Duration::from_secs(5))
                        .header("content-type", "application/json")
                        .body(text);
                    for (k, v) in headers {
                        req = req.header(k, v);
                    }
                    let _ = req.send().await;
                })
            })
            .join()
        });
        AxStatus::ACCEPTED.into_response()
    })
    .await;
    let (app, secret) = app_with_async_timeout(&url, "5m").await;
    *target.lock().unwrap() = Some((app.base.clone(), secret));
    let a = run_action(&app, "/fast").await;
    assert_eq!(a["status"], "completed", "{a}");
    // Logged as it settles (a crash before the 202 is read loses nothing),
    // its record completed once the 202 is read.
    assert_eq!(a["attempts"].as_array().map(Vec::len), Some(1), "{a}");
    let id = a["id"].as_str().unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let a = loop {
        let (_, a) = app
            .call(
                Method::GET,
                &format!("/v1/actions/{id}"),
                Some(&app.agent),
                None,
            )
            .await;
        if a["attempts"][0]["status_code"] == 202 || Instant::now() > until {
            break a;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(a["outcome"]["result"]["fast"], true, "{a}");
    let attempts = a["attempts"].as_array().expect("the attempt is logged");
    assert_eq!(attempts.len(), 1, "{a}");
    assert_eq!(attempts[0]["status_code"], 202);
    app.stop().await;
}

#[tokio::test]
async fn a_lapsed_lease_is_dispatched_again_with_the_same_webhook_id() {
    // Accepts with 202 and never calls back: the lease (async_result_timeout
    // = 1s) lapses and the next attempt goes out.
    let (url, got) = receiver(|_, _| AxStatus::ACCEPTED.into_response()).await;
    let (app, _) = app_with(&url).await;
    let a = run_action(&app, "/lost").await;
    assert_eq!(a["status"], "failed", "{a}");
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 3);
    assert!(
        got.iter()
            .all(|r| r.header("webhook-id") == a["id"].as_str().unwrap())
    );
    let attempts = a["attempts"].as_array().unwrap();
    assert_eq!(attempts[0]["status_code"], 202);
    assert!(
        attempts
            .iter()
            .any(|x| x["n"] == 1 && x["error"].as_str().is_some_and(|e| e.contains("lease"))),
        "{a}"
    );
    app.stop().await;
}

#[tokio::test]
async fn rotating_the_secret_sends_both_signatures_during_the_grace_period() {
    let (url, got) = receiver(|_, _| AxStatus::OK.into_response()).await;
    let (app, old) = app_with(&url).await;
    let (s, rotated) = app
        .call(
            Method::POST,
            "/v1/handlers/files/rotate-secret",
            Some(&app.admin),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{rotated}");
    let new = rotated["secret"].as_str().unwrap();
    assert_ne!(new, old);
    run_action(&app, "/rot").await;
    let r = got.lock().unwrap()[0].clone();
    assert_eq!(r.header("webhook-signature").split(' ').count(), 2);
    verify(&old, &r);
    verify(new, &r);
    let (s, _) = app
        .call(
            Method::POST,
            "/v1/handlers/files/rotate-secret",
            Some(&app.agent),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    app.stop().await;
}

#[tokio::test]
async fn per_handler_limit_bounds_attempts_in_flight() {
    let in_flight = Arc::new(Mutex::new((0usize, 0usize)));
    let f = in_flight.clone();
    let (url, _got) = receiver(move |_, _| {
        {
            let mut g = f.lock().unwrap();
            g.0 += 1;
            g.1 = g.1.max(g.0);
        }
        std::thread::sleep(Duration::from_millis(100));
        f.lock().unwrap().0 -= 1;
        AxStatus::OK.into_response()
    })
    .await;
    let app = TestApp::spawn_with(|s| s.dispatch.per_handler_max_in_flight = 2).await;
    app.profile("agent-1", json!("open")).await;
    app.call(
        Method::POST,
        "/v1/handlers",
        Some(&app.admin),
        Some(handler(&url)),
    )
    .await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let client = app.client.clone();
        let url = format!("{}/v1/actions?wait=30", app.base);
        let key = app.agent.clone();
        tasks.push(tokio::spawn(async move {
            client.post(url).bearer_auth(key).json(&json!({"handler": "files", "action": "write", "params": {"path": format!("/p{i}")}}))
                .send().await.unwrap().json::<Value>().await.unwrap()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap()["status"], "completed");
    }
    assert!(
        in_flight.lock().unwrap().1 <= 2,
        "max in flight {}",
        in_flight.lock().unwrap().1
    );
    app.stop().await;
}

#[tokio::test]
async fn an_allowed_action_is_stored_claimed_and_its_long_poll_answers_what_is_stored() {
    let (url, got) = receiver(|_, _| {
        // Slow enough that the first answer below sees the attempt running.
        std::thread::sleep(Duration::from_millis(300));
        (AxStatus::OK, axum::Json(json!({"ok": true}))).into_response()
    })
    .await;
    let (app, _) = app_with(&url).await;
    let body = json!({"handler": "files", "action": "write", "params": {"path": "/tmp/a"}});
    let (s, a) = app
        .call(Method::POST, "/v1/actions", Some(&app.agent), Some(body))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    // Claimed in the transaction that stored it: no dispatch pass between.
    assert_eq!(a["status"], "running", "{a}");
    let id = a["id"].as_str().unwrap();
    let (_, done) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{id}?wait=20"),
            Some(&app.agent),
            None,
        )
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(got.lock().unwrap().len(), 1);
    // A settled action's stream is its history, then the end.
    let history = app
        .client
        .get(format!("{}/v1/actions/{id}/events", app.base))
        .bearer_auth(&app.agent)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let kinds: Vec<&str> = history
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(
        kinds,
        ["action.approved", "action.started", "action.completed"],
        "{history}"
    );

    // A long-poll from the request itself: it is answered from the
    // settling event, and that answer is exactly what is stored.
    let a = run_action(&app, "/tmp/b").await;
    assert_eq!(a["status"], "completed", "{a}");
    let (_, stored) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{}", a["id"].as_str().unwrap()),
            Some(&app.agent),
            None,
        )
        .await;
    assert_eq!(a, stored);
    app.stop().await;
}
