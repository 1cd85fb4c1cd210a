//! Black-box tests: an executor's signed result callback is bound to its
//! action. A result signed for action A (its body's `action_id`, or its
//! `webhook-id`, names A) is refused at `/v1/actions/B/result`, and every
//! signed callback's `webhook-id` is used up whether it was accepted or
//! refused, so a refused one cannot be replayed where it would be taken.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use common::daemon::{Daemon, agent_key, register_handler, set_profile};
use common::raw_http::{After, RawServer, answer};
use common::{call, client};

/// A signed callback: its body and headers, as an executor sends it.
struct Callback {
    body: String,
    headers: Vec<(&'static str, String)>,
}

fn sign(secret: &str, webhook_id: &str, body: &Value) -> Callback {
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    sign_at(secret, webhook_id, body, ts)
}

/// [`sign`] with the timestamp `ts`.
fn sign_at(secret: &str, webhook_id: &str, body: &Value, ts: i64) -> Callback {
    let text = body.to_string();
    let sig = standardwebhooks::Webhook::new(secret)
        .unwrap()
        .sign(webhook_id, ts, text.as_bytes())
        .unwrap();
    Callback {
        body: text,
        headers: vec![
            ("webhook-id", webhook_id.to_owned()),
            ("webhook-timestamp", ts.to_string()),
            ("webhook-signature", sig),
        ],
    }
}

/// Posts `cb` to action `id`'s result URL; the status and answer.
async fn post(base: &str, id: &str, cb: &Callback) -> (u16, Value) {
    let mut req = client()
        .post(format!("{base}/v1/actions/{id}/result"))
        .header("content-type", "application/json")
        .body(cb.body.clone());
    for (k, v) in &cb.headers {
        req = req.header(*k, v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn status_of(base: &str, key: &str, id: &str) -> Value {
    let (s, a) = call(
        &client(),
        reqwest::Method::GET,
        format!("{base}/v1/actions/{id}"),
        key,
        None,
    )
    .await;
    assert_eq!(s, 200, "{a}");
    a
}

/// A daemon with agent `bot` (profile `open`) and handler `files`, whose
/// executor takes every delivery for later (202).
struct Setup {
    executor: RawServer,
    _dir: tempfile::TempDir,
    d: Daemon,
    agent: String,
    secret: String,
}

async fn setup() -> Setup {
    let executor = RawServer::start(|_, _| (answer("202 Accepted", &[], ""), After::Close)).await;
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    let secret = register_handler(
        &http,
        &d.base,
        &admin,
        json!({
            "id": "files", "name": "Files", "url": format!("{}/hook", executor.base),
            "permissions": [{"name": "fs.write", "parameters_schema": {"type": "object"}}],
            "actions": [{"name": "write", "permission": "fs.write", "params_schema": {"type": "object"}}]
        }),
    )
    .await;
    Setup {
        executor,
        _dir: dir,
        d,
        agent,
        secret,
    }
}

impl Setup {
    /// Writes `path` through `files`; the new action's id.
    async fn write(&self, path: &str) -> String {
        let (s, a) = call(
            &client(),
            reqwest::Method::POST,
            format!("{}/v1/actions", self.d.base),
            &self.agent,
            Some(json!({"handler": "files", "action": "write", "params": {"path": path}})),
        )
        .await;
        assert_eq!(s, 201, "{a}");
        a["id"].as_str().unwrap().to_owned()
    }

    /// Waits until the executor has had `n` deliveries.
    async fn deliveries(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.executor.requests().len() < n {
            assert!(Instant::now() < deadline, "the deliveries did not arrive");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_signed_for_one_action_is_refused_at_another_and_used_up() {
    let t = setup().await;
    let (d, agent, secret) = (&t.d, &t.agent, &t.secret);
    let ids = [t.write("/a").await, t.write("/b").await];
    let (a, b) = (ids[0].as_str(), ids[1].as_str());
    t.deliveries(2).await;
    for id in [a, b] {
        let act = status_of(&d.base, agent, id).await;
        assert_eq!(act["status"], "running", "{act}");
    }

    // A's result, signed as the reference executor signs it (its
    // webhook-id names A), posted at B.
    let for_a = sign(
        secret,
        &format!("res_{a}_1"),
        &json!({"status": "completed", "result": {"for": "a"}, "attempt": 1}),
    );
    let (s, body) = post(&d.base, b, &for_a).await;
    assert_eq!(s, 401, "a result signed for A was taken at B: {body}");
    // Titled for what the endpoint takes: a signature, not an API key.
    assert_eq!(
        body["title"], "Missing or invalid webhook signature",
        "{body}"
    );
    assert_eq!(status_of(&d.base, agent, b).await["status"], "running");
    // Refused, but used up: the same callback is not taken at A either.
    let (s, body) = post(&d.base, a, &for_a).await;
    assert_eq!(s, 401, "a refused callback was replayed: {body}");
    assert_eq!(status_of(&d.base, agent, a).await["status"], "running");

    // Without action_id in the body, the webhook-id must name the action.
    let unbound = sign(
        secret,
        "callback-1",
        &json!({"status": "completed", "result": {"for": "b"}, "attempt": 1}),
    );
    let (s, body) = post(&d.base, b, &unbound).await;
    assert_eq!(s, 401, "{body}");

    // Bound callbacks are taken, once.
    let ok_a = sign(
        secret,
        "callback-2",
        &json!({"status": "completed", "result": {"for": "a"}, "attempt": 1, "action_id": a}),
    );
    let (s, body) = post(&d.base, a, &ok_a).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["outcome"]["result"], json!({"for": "a"}));
    let ok_b = sign(
        secret,
        &format!("res_{b}_1"),
        &json!({"status": "completed", "result": {"for": "b"}, "attempt": 1}),
    );
    let (s, body) = post(&d.base, b, &ok_b).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["outcome"]["result"], json!({"for": "b"}));
    let (s, body) = post(&d.base, b, &ok_b).await;
    assert_eq!(s, 401, "replayed");
    assert_eq!(
        body["title"], "Missing or invalid webhook signature",
        "{body}"
    );

    // A callback refused because its action is settled is used up too.
    let late = sign(
        secret,
        "callback-3",
        &json!({"status": "failed", "error": "late", "attempt": 1, "action_id": a}),
    );
    let (s, _) = post(&d.base, a, &late).await;
    assert_eq!(s, 409);
    let (s, _) = post(&d.base, a, &late).await;
    assert_eq!(s, 401, "a refused callback's webhook-id is consumed");
    t.d.stop();
}

/// A callback signed with the handler's secret but at a timestamp at the
/// ends of i64 is stale (401): never a fault of the daemon's arithmetic,
/// and never a way around the 5-minute window (wrapped around, `now - ts`
/// would read as fresh).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_signed_at_the_ends_of_time_is_stale() {
    let t = setup().await;
    let (d, agent, secret) = (&t.d, &t.agent, &t.secret);
    let id = t.write("/a").await;
    t.deliveries(1).await;
    let body = json!({"status": "completed", "result": {"x": 1}, "attempt": 1, "action_id": id});
    for (n, ts) in [i64::MIN, i64::MIN + 1, i64::MAX].into_iter().enumerate() {
        let cb = sign_at(secret, &format!("cb-{n}"), &body, ts);
        let (s, answer) = post(&d.base, &id, &cb).await;
        assert_eq!(s, 401, "at {ts}: {answer}");
    }
    assert_eq!(status_of(&d.base, agent, &id).await["status"], "running");
    t.d.stop();
}

/// One executor cannot use up another handler's callback ids: a callback
/// signed with `atk`'s secret, at `atk`'s own action, naming the
/// webhook-id `files`'s executor will send (`res_<id>_1`) and refused for
/// its body, leaves that id to `files`, whose result is then taken. A
/// webhook-id longer than 256 bytes is refused before anything is
/// stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_cannot_use_up_another_handlers_callback_ids() {
    let t = setup().await;
    let (d, agent, secret) = (&t.d, &t.agent, &t.secret);
    let http = client();
    let atk_secret = register_handler(
        &http,
        &d.base,
        &d.admin_key(),
        json!({
            "id": "atk", "name": "Attacker", "url": format!("{}/atk", t.executor.base),
            "permissions": [{"name": "atk.go", "parameters_schema": {"type": "object"}}],
            "actions": [{"name": "go", "permission": "atk.go", "params_schema": {"type": "object"}}]
        }),
    )
    .await;
    let victim = t.write("/v").await;
    let (s, own) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions", d.base),
        agent,
        Some(json!({"handler": "atk", "action": "go", "params": {}})),
    )
    .await;
    assert_eq!(s, 201, "{own}");
    let own = own["id"].as_str().unwrap();
    t.deliveries(2).await;
    let stolen = format!("res_{victim}_1");
    let mut burn = sign(&atk_secret, &stolen, &json!(null));
    burn.body = "not json".to_owned();
    let sig = standardwebhooks::Webhook::new(&atk_secret)
        .unwrap()
        .sign(&stolen, burn.headers[1].1.parse().unwrap(), b"not json")
        .unwrap();
    burn.headers[2].1 = sig;
    let (s, body) = post(&d.base, own, &burn).await;
    assert_eq!(s, 400, "{body}");
    // The victim's executor reports its result under that id: taken.
    let real = sign(
        secret,
        &stolen,
        &json!({"status": "completed", "result": {"ok": true}, "attempt": 1}),
    );
    let (s, body) = post(&d.base, &victim, &real).await;
    assert_eq!(s, 200, "another handler used up this id: {body}");
    assert_eq!(
        status_of(&d.base, agent, &victim).await["status"],
        "completed"
    );
    // An id past 256 bytes is refused as a bad signature.
    let long = sign(
        &atk_secret,
        &format!("res_{own}_{}", "x".repeat(300)),
        &json!({"status": "completed", "attempt": 1}),
    );
    let (s, body) = post(&d.base, own, &long).await;
    assert_eq!(s, 401, "{body}");
    t.d.stop();
}

/// An asynchronous result past the bound on results is kept as a
/// truncation note and settles the action, as an answer given at once
/// is: refused, it left the action running until its result timed out
/// (the callback's webhook-id used up, and executors retry no 4xx).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_past_the_bound_settles_the_action_as_a_truncation_note() {
    let t = setup().await;
    let (d, agent, secret) = (&t.d, &t.agent, &t.secret);
    let id = t.write("/big").await;
    t.deliveries(1).await;
    let big = "x".repeat(600 * 1024);
    let cb = sign(
        secret,
        &format!("res_{id}_1"),
        &json!({"status": "completed", "result": {"content": big}, "attempt": 1, "action_id": id}),
    );
    let (s, body) = post(&d.base, &id, &cb).await;
    assert_eq!(s, 200, "{body}");
    let act = status_of(&d.base, agent, &id).await;
    assert_eq!(act["status"], "completed", "{act}");
    assert_eq!(act["outcome"]["result"]["truncated"], true, "{act}");
    assert!(act["outcome"]["result"]["size"].as_u64().unwrap() > 600 * 1024);
}

/// An asynchronous result may report text holding NUL (a file's bytes):
/// it is kept, not refused (which left the action running for the hour
/// of its result timeout); a NUL in the error text is kept as `␀`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_holding_nul_settles_the_action() {
    let t = setup().await;
    let (d, agent, secret) = (&t.d, &t.agent, &t.secret);
    let id = t.write("/nul").await;
    t.deliveries(1).await;
    let cb = sign(
        secret,
        &format!("res_{id}_1"),
        &json!({"status": "failed", "result": {"stdout": "before\u{0}after"},
                "error": "bad\u{0}byte", "attempt": 1, "action_id": id}),
    );
    let (s, body) = post(&d.base, &id, &cb).await;
    assert_eq!(s, 200, "{body}");
    let act = status_of(&d.base, agent, &id).await;
    assert_eq!(act["status"], "failed", "{act}");
    assert_eq!(
        act["outcome"]["result"]["stdout"], "before\u{0}after",
        "{act}"
    );
    assert_eq!(act["outcome"]["error"], "bad\u{2400}byte", "{act}");
}
