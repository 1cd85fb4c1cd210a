//! What a chat API that fails or hangs does to the gate and to the other
//! chats: nothing, and its own messages are retried.

use std::time::{Duration, Instant};

use actiongate_server::config::DiscordMode;
use ed25519_dalek::SigningKey;
use serde_json::json;

use super::common::TestApp;
use super::fake::{Call, Fake};
use super::{assert_retried, pending, request_latency};

fn mine(calls: &[Call], id: &str) -> Vec<Call> {
    calls
        .iter()
        .filter(|c| c.body.to_string().contains(id))
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_hanging_chat_api_holds_up_only_its_own_chat() {
    let telegram = Fake::start().await;
    let slack = Fake::start().await;
    // Telegram's API takes every call and never answers.
    telegram.hang(true);
    let (tg, sl) = (telegram.base.clone(), slack.base.clone());
    let app = TestApp::spawn_with(move |s| {
        s.connectors.timeout_seconds = 2;
        let t = &mut s.connectors.telegram;
        t.token = "123:TOKEN".into();
        t.chat_id = "-1001".into();
        t.api_base = tg;
        t.poll_seconds = 1;
        let c = &mut s.connectors.slack;
        c.token = "xoxb-test".into();
        c.channel = "C1".into();
        c.signing_secret = "secret".into();
        c.api_base = format!("{sl}/api");
    })
    .await;
    app.profile("agent-1", json!("standard")).await;

    let mut ids = Vec::new();
    for detail in ["make deploy", "make release", "make publish"] {
        let asked = Instant::now();
        let id = pending(&app, detail).await;
        slack
            .wait_for("/chat.postMessage", "slack's message", |c| {
                c.iter()
                    .any(|c| c.answered >= 0 && c.body.to_string().contains(&id))
            })
            .await;
        let took = asked.elapsed();
        // Sent one after another, each of Slack's would wait for a hung
        // Telegram call (2 s).
        assert!(
            took < Duration::from_millis(1500),
            "slack's message took {took:?}"
        );
        ids.push(id);
    }
    // Each call is bounded: the hung post ends and is tried again within
    // 5 s of its end.
    let posts = telegram
        .wait_for("/sendMessage", "a retried telegram post", |c| {
            mine(c, &ids[0]).len() >= 2
        })
        .await;
    let tries = mine(&posts, &ids[0]);
    let gap = tries[1].at - tries[0].at;
    assert!(
        gap < Duration::from_secs(2 + 5),
        "first retry {gap:?} after the first try"
    );
    // Telegram answers again: every message goes out.
    telegram.hang(false);
    for id in &ids {
        telegram
            .wait_for("/sendMessage", "telegram's message", |c| {
                c.iter()
                    .any(|c| c.answered >= 0 && c.body.to_string().contains(id))
            })
            .await;
    }
    app.stop().await;
}

/// The four chats on one fake API, every post failing with 500: the gate
/// answers as fast as with the API up, and each chat's post is retried.
#[tokio::test]
async fn every_chat_api_failing_leaves_the_gate_as_fast_and_each_send_is_retried() {
    let fake = Fake::start().await;
    let base = fake.base.clone();
    let app = TestApp::spawn_with(move |s| {
        let t = &mut s.connectors.telegram;
        t.token = "123:TOKEN".into();
        t.chat_id = "-1001".into();
        t.api_base = base.clone();
        t.poll_seconds = 1;
        let c = &mut s.connectors.slack;
        c.token = "xoxb-test".into();
        c.channel = "C1".into();
        c.signing_secret = "secret".into();
        c.api_base = format!("{base}/api");
        let d = &mut s.connectors.discord;
        d.token = "bot-token".into();
        d.channel_id = "C9".into();
        d.mode = DiscordMode::Http;
        d.public_key = hex::encode(
            SigningKey::from_bytes(&[7u8; 32])
                .verifying_key()
                .to_bytes(),
        );
        d.api_base = format!("{base}/api/v10");
        let w = &mut s.connectors.whatsapp;
        w.access_token = "EAAG-test".into();
        w.phone_number_id = "PHONE".into();
        w.approvers = vec!["+15550100".into()];
        w.app_secret = "app-secret".into();
        w.verify_token = "verify".into();
        w.api_base = format!("{base}/v21.0");
    })
    .await;
    app.profile("agent-1", json!("standard")).await;
    let chats = [
        "/sendMessage",
        "/chat.postMessage",
        "/channels/C9/messages",
        "/PHONE/messages",
    ];

    let healthy = request_latency(&app, 9).await;
    for chat in chats {
        fake.wait_for(chat, "the healthy messages", |c| c.len() >= 9)
            .await;
    }
    fake.fail_posts(100_000);
    let failing = request_latency(&app, 9).await;
    eprintln!("median request: {healthy:?} with the chat APIs up, {failing:?} with them failing");
    assert!(
        failing < healthy * 3 + Duration::from_millis(50),
        "requests slowed: {healthy:?} then {failing:?}"
    );
    let id = pending(&app, "make failover").await;
    for chat in chats {
        let calls = fake
            .wait_for(chat, "two failed sends", |c| mine(c, &id).len() >= 2)
            .await;
        assert_retried(&mine(&calls, &id));
    }
    fake.fail_posts(0);
    for chat in chats {
        fake.wait_for(chat, "the message at last", |c| {
            mine(c, &id).iter().any(|c| c.answered >= 0)
        })
        .await;
    }
    app.stop().await;
}

/// A local server that records each request's path and answers every one
/// with `status` and `location`.
async fn answering(
    status: u16,
    location: Option<String>,
) -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(String, Instant)>>>,
) {
    use axum::http::{StatusCode, Uri, header};
    use axum::response::IntoResponse;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let app = axum::Router::new().fallback(move |uri: Uri| {
        let log = log.clone();
        let location = location.clone();
        async move {
            log.lock()
                .unwrap()
                .push((uri.path().to_owned(), Instant::now()));
            let mut resp = (
                StatusCode::from_u16(status).unwrap(),
                [(header::CONTENT_TYPE, "application/json")],
                r#"{"ok":true,"ts":"1.1","channel":"C1"}"#,
            )
                .into_response();
            if let Some(l) = location {
                resp.headers_mut()
                    .insert(header::LOCATION, l.parse().unwrap());
            }
            resp
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (base, seen)
}

/// A chat API answering a redirect: the call (and its bot token) is never
/// re-sent to the `Location`, and the message is retried like after a 5xx
/// (a retried Slack post first looks for the message in the channel).
#[tokio::test]
async fn a_redirect_from_a_chat_api_is_not_followed_and_is_retried() {
    let (internal, internal_seen) = answering(200, None).await;
    let (api, api_seen) = answering(307, Some(format!("{internal}/stolen"))).await;
    let app = TestApp::spawn_with(move |s| {
        let c = &mut s.connectors.slack;
        c.token = "xoxb-test".into();
        c.channel = "C1".into();
        c.signing_secret = "secret".into();
        c.api_base = format!("{api}/api");
    })
    .await;
    app.profile("agent-1", json!("standard")).await;
    pending(&app, "make deploy").await;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let posts: Vec<_> = api_seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| {
                p.ends_with("/chat.postMessage") || p.ends_with("/conversations.history")
            })
            .cloned()
            .collect();
        if posts.len() >= 2 {
            assert!(posts[1].1 - posts[0].1 < Duration::from_secs(5));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the redirected post was not retried: {posts:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        internal_seen.lock().unwrap().is_empty(),
        "the connector followed the redirect"
    );
    app.stop().await;
}
