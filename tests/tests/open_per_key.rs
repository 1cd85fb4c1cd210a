//! Black-box: `limits.max_open_per_key`. One key cannot hold event streams
//! and long-polls open without bound (each a connection, a file descriptor
//! and memory for as long as its client keeps it): past the limit new ones
//! get 429 problem+json naming the limit, before anything is done; other
//! keys are not affected; a closed one frees its place.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Keyed, status_json};
use crate::common::{call, metric};

/// Opens `GET {path}` with `key`; the response, its body left unread.
async fn open(k: &Keyed, key: &str, path: &str) -> reqwest::Response {
    k.http
        .get(format!("{}{path}", k.d.base))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
}

async fn assert_refused(resp: reqwest::Response, what: &str) {
    let (s, ctype, body) = status_json(resp).await;
    assert_eq!(s, 429, "{what}: {body}");
    assert_eq!(ctype.as_deref(), Some("application/problem+json"));
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("limits.max_open_per_key"),
        "{what}: {body}"
    );
}

/// `actiongate_long_polls_waiting` from `/metrics`.
async fn long_polls_waiting(k: &Keyed) -> usize {
    metric(&k.http, &k.d.base, "actiongate_long_polls_waiting").await as usize
}

pub(crate) async fn actions_of(k: &Keyed) -> usize {
    let (s, page) = call(
        &k.http,
        Method::GET,
        format!("{}/v1/actions?limit=200", k.d.base),
        &k.operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{page}");
    page["items"].as_array().unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_holds_at_most_its_limit_of_streams_and_long_polls() {
    let k = Keyed::start(&[
        ("ACTIONGATE_LIMITS__MAX_OPEN_PER_KEY", "3"),
        ("ACTIONGATE_EVENTS__HEARTBEAT", "1s"),
    ])
    .await;
    // One pending action to wait on (the default profile asks).
    let (s, action) = call(
        &k.http,
        Method::POST,
        format!("{}/v1/actions", k.d.base),
        &k.agent,
        Some(json!({"tool": "deploy", "detail": "prod"})),
    )
    .await;
    assert_eq!(s, 201, "{action}");
    let id = action["id"].as_str().unwrap().to_owned();

    // Two streams and one long-poll: the limit.
    let mut held = Vec::new();
    for path in ["/v1/events", &format!("/v1/actions/{id}/events")] {
        let resp = open(&k, &k.agent, path).await;
        assert_eq!(resp.status(), 200, "{path}");
        held.push(resp);
    }
    let poll = {
        let (http, url, key) = (
            k.http.clone(),
            format!("{}/v1/actions/{id}?wait=30", k.d.base),
            k.agent.clone(),
        );
        tokio::spawn(async move { http.get(url).bearer_auth(key).send().await })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while long_polls_waiting(&k).await < 1 {
        assert!(Instant::now() < deadline, "the long-poll never waited");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_refused(open(&k, &k.agent, "/v1/events").await, "a fourth stream").await;

    // Every other way to hold one more is refused too, and changes nothing.
    assert_refused(
        open(&k, &k.agent, &format!("/v1/actions/{id}/events")).await,
        "an action's stream",
    )
    .await;
    assert_refused(
        open(&k, &k.agent, &format!("/v1/actions/{id}?wait=5")).await,
        "a long-poll",
    )
    .await;
    let before = actions_of(&k).await;
    let resp = k
        .http
        .post(format!("{}/v1/actions?wait=5", k.d.base))
        .bearer_auth(&k.agent)
        .json(&json!({"tool": "deploy", "detail": "staging"}))
        .send()
        .await
        .unwrap();
    assert_refused(resp, "a request that waits").await;
    assert_eq!(
        actions_of(&k).await,
        before,
        "the refused request was stored"
    );

    // What does not hold anything still works, and other keys are not
    // affected.
    let (s, got) = call(
        &k.http,
        Method::GET,
        format!("{}/v1/actions/{id}", k.d.base),
        &k.agent,
        None,
    )
    .await;
    assert_eq!(s, 200, "{got}");
    let other = open(&k, &k.operator, "/v1/events").await;
    assert_eq!(other.status(), 200);

    // The long-poll ends when the action is approved, the streams when
    // their clients close them: each place is given back.
    let (s, _) = call(
        &k.http,
        Method::POST,
        format!("{}/v1/actions/{id}/approve", k.d.base),
        &k.operator,
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 200);
    let answered = poll.await.unwrap().unwrap();
    assert_eq!(answered.status(), 200);
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut reopened = Vec::new();
    while reopened.len() < 3 {
        let resp = open(&k, &k.agent, "/v1/events").await;
        if resp.status() == 200 {
            reopened.push(resp);
            continue;
        }
        let (s, _, body): (u16, _, Value) = status_json(resp).await;
        assert_eq!(s, 429, "{body}");
        assert!(
            Instant::now() < deadline,
            "closed streams kept their places"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Long-polls whose clients went away mid-wait are no longer counted open
/// on `/metrics` (`actiongate_long_polls_open` counted them for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_long_polls_are_not_counted_open() {
    let k = Keyed::start(&[]).await;
    let (s, action) = call(
        &k.http,
        Method::POST,
        format!("{}/v1/actions", k.d.base),
        &k.agent,
        Some(json!({"tool": "deploy", "detail": "prod"})),
    )
    .await;
    assert_eq!(s, 201, "{action}");
    let id = action["id"].as_str().unwrap().to_owned();
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    for _ in 0..3 {
        let gone = impatient
            .get(format!("{}/v1/actions/{id}?wait=30", k.d.base))
            .bearer_auth(&k.agent)
            .send()
            .await;
        assert!(gone.is_err(), "the long-poll answered: {gone:?}");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let open = metric(&k.http, &k.d.base, "actiongate_long_polls_open").await;
        if open == 0.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{open} long-polls counted open after their clients left"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A stateless MCP listen stream of `key`'s, acknowledged; or the refusal.
async fn listen(k: &Keyed, key: &str) -> Result<reqwest::Response, reqwest::Response> {
    let resp = crate::cluster_mcp::mcp_request(
        &k.http,
        &k.d.base,
        key,
        "subscriptions/listen",
        None,
        json!({"notifications": {"toolsListChanged": true}}),
        false,
    )
    .send()
    .await
    .unwrap();
    if resp.status().is_success() {
        Ok(resp)
    } else {
        Err(resp)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_streams_count_against_the_limit_and_end_with_their_key() {
    let k = Keyed::start(&[("ACTIONGATE_LIMITS__MAX_OPEN_PER_KEY", "2")]).await;
    // Two MCP listen streams hold the key's two places...
    let first = listen(&k, &k.agent).await.expect("a first listen stream");
    let _second = listen(&k, &k.agent).await.expect("a second listen stream");
    // ... so a third MCP request and an event stream are refused.
    let refused = listen(&k, &k.agent)
        .await
        .expect_err("a third listen stream");
    assert_refused(refused, "an MCP request past the limit").await;
    assert_refused(open(&k, &k.agent, "/v1/events").await, "an event stream").await;

    // Revoking the key ends its MCP streams, as it does its event streams.
    let (s, keys) = call(
        &k.http,
        Method::GET,
        format!("{}/v1/keys", k.d.base),
        &k.admin,
        None,
    )
    .await;
    assert_eq!(s, 200, "{keys}");
    let items = keys
        .as_array()
        .or_else(|| keys["items"].as_array())
        .unwrap();
    let key_id = items
        .iter()
        .find(|key| key["agent"] == "bot" && key["revoked_at"].is_null())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, b) = call(
        &k.http,
        Method::DELETE,
        format!("{}/v1/keys/{key_id}", k.d.base),
        &k.admin,
        None,
    )
    .await;
    assert!((200..300).contains(&s), "{b}");
    let mut body = first.bytes_stream();
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = body.next().await {
            if chunk.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "an MCP stream outlived its key");
}
