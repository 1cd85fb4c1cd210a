//! Black-box tests: sensitive means sensitive. A handler registration
//! whose scope pointer is, contains or lies inside a sensitive param is
//! refused (422 naming both), as a `detail` naming one already was; and a
//! sensitive value sent by an agent appears nowhere the daemon shows it
//! (the action, its list, the audit export, the event stream).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::audit::export;
use crate::common;
use common::daemon::{Daemon, agent_key, register_handler, role_key};
use common::{call, client};

const SECRET: &str = "tok-5f0c1b7e-not-for-eyes";

fn registration(scope: Value, sensitive: Value) -> Value {
    json!({
        "id": "vault", "name": "Vault", "url": "http://127.0.0.1:9/hook",
        "permissions": [{"name": "read", "parameters_schema": {"type": "object", "properties": {"key": {}}}}],
        "actions": [{
            "name": "read", "permission": "read",
            "params_schema": {"type": "object", "properties": {
                "user": {"type": "string"},
                "auth": {"type": "object", "properties": {"token": {"type": "string"}}}
            }},
            "scope": scope, "sensitive": sensitive, "detail": "read as {user}"
        }]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_pointer_at_a_sensitive_param_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    for (scope, sensitive) in [
        ("/auth/token", "/auth/token"), // is
        ("/auth", "/auth/token"),       // contains
        ("/auth/token", "/auth"),       // lies inside
    ] {
        let (s, p) = call(
            &http,
            reqwest::Method::POST,
            format!("{}/v1/handlers", d.base),
            &admin,
            Some(registration(json!({"key": scope}), json!([sensitive]))),
        )
        .await;
        assert_eq!(s, 422, "{scope} vs {sensitive}: {p}");
        let e = &p["errors"][0];
        assert_eq!(e["field"], "actions[0].scope.key", "{p}");
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.contains(&format!("'{scope}'")) && msg.contains(&format!("'{sensitive}'")),
            "names both: {msg}"
        );
    }
    // Not stored: the id is still free.
    register_handler(
        &http,
        &d.base,
        &admin,
        registration(json!({"key": "/user"}), json!(["/auth"])),
    )
    .await;
    d.stop();
}

/// A daemon whose handler `vault` takes a sensitive `/auth/token`, with
/// an operator key and agent `bot`'s key: its data dir, the daemon, a
/// client, and the operator and agent keys.
async fn with_a_sensitive_token() -> (tempfile::TempDir, Daemon, reqwest::Client, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    register_handler(
        &http,
        &d.base,
        &admin,
        registration(json!({"key": "/user"}), json!(["/auth/token"])),
    )
    .await;
    (dir, d, http, operator, agent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sensitive_value_is_shown_nowhere() {
    let (_dir, d, http, operator, agent) = with_a_sensitive_token().await;
    // Follow the operator's event stream while the action is made.
    let stream = http
        .get(format!("{}/v1/events", d.base))
        .bearer_auth(&operator)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let (s, a) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions", d.base),
        &agent,
        Some(json!({"handler": "vault", "action": "read",
            "params": {"user": "ada", "auth": {"token": SECRET}}})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["scope"], json!({"key": "ada"}));
    assert!(!a.to_string().contains(SECRET), "{a}");
    let id = a["id"].as_str().unwrap();

    let mut seen = String::new();
    let mut body = stream.bytes_stream();
    let _ = tokio::time::timeout(Duration::from_secs(3), async {
        while let Some(Ok(chunk)) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("permission.needed") {
                break;
            }
        }
    })
    .await;
    assert!(seen.contains(id), "the stream carried the action: {seen}");
    assert!(!seen.contains(SECRET), "{seen}");
    for path in [format!("/v1/actions/{id}"), "/v1/actions".to_owned()] {
        let (_, v) = call(
            &http,
            reqwest::Method::GET,
            format!("{}{path}", d.base),
            &operator,
            None,
        )
        .await;
        assert!(!v.to_string().contains(SECRET), "{path}: {v}");
    }
    let text = export(&http, &d.base, &operator).await;
    assert!(text.contains(id));
    assert!(!text.contains(SECRET), "{text}");
    d.stop();
}

/// Everyone sees a sensitive value as `***`, so an approver's edit may not
/// change it (an approver after them could not see the change): a new
/// value is refused, naming the param; the value sent back as shown,
/// `***`, keeps the one the agent sent, and the executor is sent that
/// (the receipt's params digest is of it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_cannot_change_a_sensitive_value_nobody_can_see() {
    use sha2::Digest;
    let (_dir, d, http, operator, agent) = with_a_sensitive_token().await;
    let (s, a) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions", d.base),
        &agent,
        Some(json!({"handler": "vault", "action": "read",
            "params": {"user": "ada", "auth": {"token": SECRET}}})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    let id = a["id"].as_str().unwrap();
    let approve = |params: Value| {
        call(
            &http,
            reqwest::Method::POST,
            format!("{}/v1/actions/{id}/approve", d.base),
            &operator,
            Some(json!({"params": params})),
        )
    };
    let (s, p) = approve(json!({"user": "bob", "auth": {"token": "tok-mine"}})).await;
    assert_eq!(s, 422, "{p}");
    assert_eq!(p["errors"][0]["field"], "params/auth/token", "{p}");
    let (s, p) = approve(json!({"user": "bob", "auth": {}})).await;
    assert_eq!(s, 422, "dropping it is a change too: {p}");
    let (s, p) = approve(json!({"user": "bob", "auth": {"token": "***"}})).await;
    assert_eq!(s, 200, "{p}");
    let (s, r) = call(
        &http,
        reqwest::Method::GET,
        format!("{}/v1/actions/{id}/receipt", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{r}");
    // The digest is keyed, and the key is not given to whoever may not
    // see the token: a short secret cannot be tried against it.
    assert!(r.get("params_key").is_none(), "{r}");
    let (s, own) = call(
        &http,
        reqwest::Method::GET,
        format!("{}/v1/actions/{id}/receipt", d.base),
        &agent,
        None,
    )
    .await;
    assert_eq!(s, 200, "{own}");
    assert_eq!(own["claims"], r["claims"]);
    let key = {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(own["params_key"].as_str().unwrap())
            .unwrap()
    };
    assert_eq!(key.len(), 32);
    // Keys sorted, no spaces: serde_json's own order here.
    let sent = json!({"auth": {"token": SECRET}, "user": "bob"}).to_string();
    let mac = {
        use hmac::Mac;
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
        mac.update(sent.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    };
    assert_eq!(
        r["claims"]["params_digest"],
        format!("hmac-sha256:{mac}"),
        "{r}"
    );
    let unkeyed = hex::encode(sha2::Sha256::digest(sent.as_bytes()));
    assert!(!r.to_string().contains(&unkeyed), "{r}");
    d.stop();
}

/// An executor that echoes a sensitive value back, in its result or in the
/// words of its refusal, sync or by callback: the value is `***` in what
/// the daemon keeps and shows (the action, the audit export).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sensitive_value_an_executor_echoes_is_masked_in_the_record() {
    use crate::common::raw_http::{After, RawServer, answer};
    // Delivery 1: a result that repeats its input; 2: a refusal quoting
    // it; 3: 202, its result posted later.
    let exec = RawServer::start(|n, req| {
        let params = req.json()["params"].clone();
        let token = params["auth"]["token"].as_str().unwrap_or("").to_owned();
        let (status, body) = match n {
            1 => (
                "200 OK",
                json!({"echo": params, "log": format!("used {token}"), token.clone(): true}),
            ),
            2 => (
                "422 Unprocessable Entity",
                json!({"error": format!("bad token {token}")}),
            ),
            _ => ("202 Accepted", json!({})),
        };
        let ct = [("content-type", "application/json")];
        (answer(status, &ct, &body.to_string()), After::Close)
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let mut reg = registration(json!({"key": "/user"}), json!(["/auth/token"]));
    reg["url"] = json!(format!("{}/hook", exec.base));
    let secret = register_handler(&http, &d.base, &admin, reg).await;

    let mut ids = Vec::new();
    for _ in 0..3 {
        let (s, a) = call(
            &http,
            reqwest::Method::POST,
            format!("{}/v1/actions", d.base),
            &agent,
            Some(json!({"handler": "vault", "action": "read",
                "params": {"user": "ada", "auth": {"token": SECRET}}})),
        )
        .await;
        assert_eq!(s, 201, "{a}");
        let id = a["id"].as_str().unwrap().to_owned();
        let (s, b) = call(
            &http,
            reqwest::Method::POST,
            format!("{}/v1/actions/{id}/approve", d.base),
            &operator,
            Some(json!({})),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        // One at a time, so the deliveries come in this order.
        let want = if ids.len() == 2 { "running" } else { "" };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (_, a) = call(
                &http,
                reqwest::Method::GET,
                format!("{}/v1/actions/{id}", d.base),
                &operator,
                None,
            )
            .await;
            let status = a["status"].as_str().unwrap_or("");
            if ["completed", "failed"].contains(&status)
                // `attempts` is left out while there are none.
                || (status == want && a["attempts"].as_array().is_some_and(|v| !v.is_empty()))
            {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{a}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        ids.push(id);
    }
    // The third answered 202: its result comes by a signed callback.
    let id = &ids[2];
    let body = json!({"action_id": id, "attempt": 1, "status": "completed",
        "result": {"said": format!("token {SECRET} accepted")}, "error": null})
    .to_string();
    let wh = standardwebhooks::Webhook::new(&secret).unwrap();
    let webhook_id = format!("res_{id}_1");
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let sig = wh.sign(&webhook_id, ts, body.as_bytes()).unwrap();
    let resp = http
        .post(format!("{}/v1/actions/{id}/result", d.base))
        .header("webhook-id", &webhook_id)
        .header("webhook-timestamp", ts.to_string())
        .header("webhook-signature", sig)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());

    let mut shown = Vec::new();
    for id in &ids {
        let (_, a) = call(
            &http,
            reqwest::Method::GET,
            format!("{}/v1/actions/{id}", d.base),
            &operator,
            None,
        )
        .await;
        shown.push(a);
    }
    assert_eq!(shown[0]["status"], "completed", "{}", shown[0]);
    assert_eq!(
        shown[0]["outcome"]["result"]["log"], "used ***",
        "{}",
        shown[0]
    );
    assert_eq!(shown[0]["outcome"]["result"]["***"], true, "{}", shown[0]);
    assert_eq!(shown[1]["status"], "failed", "{}", shown[1]);
    assert_eq!(
        shown[1]["outcome"]["error"], "bad token ***",
        "{}",
        shown[1]
    );
    assert_eq!(shown[2]["status"], "completed", "{}", shown[2]);
    assert_eq!(
        shown[2]["outcome"]["result"]["said"], "token *** accepted",
        "{}",
        shown[2]
    );
    for a in &shown {
        assert!(!a.to_string().contains(SECRET), "{a}");
    }
    let text = export(&http, &d.base, &operator).await;
    assert!(text.contains(&ids[2]));
    assert!(!text.contains(SECRET), "{text}");
    d.stop();
}
