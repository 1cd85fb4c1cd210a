//! Black-box: `limits.max_in_flight_per_key`. One key cannot have more
//! requests being answered at once than its limit (so it cannot queue
//! every other caller's behind its own): past it, 429 problem+json naming
//! the limit, with nothing done; other keys are not affected, nor the
//! key's long-polls (counted by `limits.max_open_per_key`); a request
//! answered frees its place.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::common::daemon::Keyed;
use crate::common::{call, metric};
use crate::open_per_key::actions_of;

/// A `POST /v1/check` of `key` whose body has only begun to arrive: in
/// flight until it is sent whole or its connection closes.
async fn unfinished(k: &Keyed, key: &str) -> TcpStream {
    let addr = k.d.base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/check HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: 64\r\n\r\n{{\"tool\""
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s
}

/// `POST {path}` of `body` with `key`.
async fn post(k: &Keyed, key: &str, path: &str, body: Value) -> (u16, Value) {
    let url = format!("{}{path}", k.d.base);
    call(&k.http, Method::POST, url, key, Some(body)).await
}

async fn check(k: &Keyed, key: &str) -> (u16, Value) {
    post(k, key, "/v1/check", json!({"tool": "bash", "detail": "ls"})).await
}

async fn limit_reached(k: &Keyed) -> f64 {
    let name = r#"actiongate_limit_reached_total{limit="max_in_flight_per_key"}"#;
    metric(&k.http, &k.d.base, name).await
}

/// Checks with `key` until one is answered `status` (within 10 s).
async fn until_checked(k: &Keyed, key: &str, status: u16) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (s, body) = check(k, key).await;
        if s == status {
            return body;
        }
        assert!(Instant::now() < deadline, "still {s}: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `n` unfinished requests of `key` holding its places, once a check of
/// the same key is refused (within 10 s), and that refusal. A check sent
/// before the daemon has read one of them takes that place for a moment,
/// and that one is refused instead: it is sent again.
async fn hold_places(k: &Keyed, key: &str, n: usize) -> (Vec<TcpStream>, Value) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut slow = Vec::new();
    loop {
        // An answered one (refused, or closed) holds nothing: replace it.
        slow.retain(|s: &TcpStream| {
            let mut buf = [0u8; 512];
            matches!(s.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        });
        while slow.len() < n {
            slow.push(unfinished(k, key).await);
        }
        let (s, body) = check(k, key).await;
        if s == 429 {
            return (slow, body);
        }
        assert!(Instant::now() < deadline, "still {s}: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_has_at_most_its_limit_of_requests_being_answered() {
    let k = Keyed::start(&[("ACTIONGATE_LIMITS__MAX_IN_FLIGHT_PER_KEY", "2")]).await;
    // A pending action to long-poll (the default profile asks).
    let deploy = json!({"tool": "deploy", "detail": "prod"});
    let (s, action) = post(&k, &k.agent, "/v1/actions", deploy).await;
    assert_eq!(s, 201, "{action}");
    let id = action["id"].as_str().unwrap().to_owned();
    let before = limit_reached(&k).await;

    // Two requests still being sent: the key's limit.
    let (mut slow, refused) = hold_places(&k, &k.agent, 2).await;
    assert_eq!(refused["status"], 429, "{refused}");
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("limits.max_in_flight_per_key"),
        "{refused}"
    );
    // Refused before anything was done: no action stored.
    let ls = json!({"tool": "bash", "detail": "ls"});
    let (s, body) = post(&k, &k.agent, "/v1/actions", ls).await;
    assert_eq!(s, 429, "{body}");
    // Another key is not affected.
    assert_eq!(actions_of(&k).await, 1);
    let after = limit_reached(&k).await;
    assert!(after >= before + 2.0, "{before} then {after}");

    // A long-poll of the same key holds a place of its own kind.
    let (s, polled) = call(
        &k.http,
        Method::GET,
        format!("{}/v1/actions/{id}?wait=1", k.d.base),
        &k.agent,
        None,
    )
    .await;
    assert_eq!(s, 200, "{polled}");
    assert_eq!(polled["status"], "pending");

    // One connection closes: its place is free again.
    drop(slow.pop());
    let answered = until_checked(&k, &k.agent, 200).await;
    assert!(answered["result"].is_string(), "{answered}");
    drop(slow);
}
