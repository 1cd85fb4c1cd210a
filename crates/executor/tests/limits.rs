//! The executor's HTTP limits against clients without the secret: half-sent
//! requests are closed, connections are capped, and a body is not read
//! before the signature headers pass.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;

use std::time::{Duration, Instant};

use common::Exec;
use reqwest::StatusCode;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn connect(ex: &Exec) -> TcpStream {
    let addr = ex
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    TcpStream::connect(addr).await.unwrap()
}

/// Reads until the executor answers (a whole response head) or closes the
/// connection, or `wait` passes; returns what it sent, or `None` if it
/// neither answered nor closed.
async fn closed_within(s: &mut TcpStream, wait: Duration) -> Option<String> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(wait, async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    if got.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
            }
        }
    })
    .await;
    read.ok()
        .map(|()| String::from_utf8_lossy(&got).into_owned())
}

#[tokio::test]
async fn a_half_sent_request_head_is_closed_after_the_read_timeout() {
    let ex = Exec::start_with(&["--request-read-timeout", "1s"]).await;
    let mut s = connect(&ex).await;
    s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let start = Instant::now();
    assert!(
        closed_within(&mut s, Duration::from_secs(10))
            .await
            .is_some(),
        "the executor kept a half-sent request open"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_body_that_never_arrives_is_given_up_after_the_read_timeout() {
    let ex = Exec::start_with(&["--request-read-timeout", "1s"]).await;
    let body = serde_json::to_vec(&Exec::envelope("act_x", "read_file", json!({}), 1)).unwrap();
    let mut head = String::from("POST / HTTP/1.1\r\nHost: x\r\n");
    for (k, v) in ex.signer.headers("act_x", &body).unwrap() {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    let mut s = connect(&ex).await;
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&body[..10]).await.unwrap();
    let answer = closed_within(&mut s, Duration::from_secs(10))
        .await
        .expect("the executor waited for the body for ever");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
}

#[tokio::test]
async fn connections_past_the_cap_wait_until_one_closes() {
    let ex = Exec::start_with(&["--max-connections", "2", "--request-read-timeout", "2s"]).await;
    let mut idle = vec![connect(&ex).await, connect(&ex).await];
    for s in &mut idle {
        s.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let healthz = format!("{}healthz", ex.url);
    let waited =
        tokio::time::timeout(Duration::from_millis(700), ex.client.get(&healthz).send()).await;
    assert!(
        waited.is_err(),
        "a third connection was served past --max-connections 2"
    );
    // Once the idle ones time out, deliveries go through again.
    let (s, body) = ex
        .run(
            "create_file",
            json!({"filepath": "a.txt", "content": "x", "reason": "r"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn at_the_cap_idle_kept_alive_connections_give_way_to_waiting_ones() {
    // A read timeout far past the test: only closing the idle ones lets
    // the third connection in.
    let ex = Exec::start_with(&["--max-connections", "2", "--request-read-timeout", "60s"]).await;
    let mut kept = Vec::new();
    for _ in 0..2 {
        let mut s = connect(&ex).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let head = closed_within(&mut s, Duration::from_secs(10))
            .await
            .unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        kept.push(s);
    }
    // Both answered and kept alive, idle: a delivery on a new connection
    // is served at once, not after their 60 s.
    let start = Instant::now();
    let (s, body) = tokio::time::timeout(
        Duration::from_secs(10),
        ex.run(
            "create_file",
            json!({"filepath": "a.txt", "content": "x", "reason": "r"}),
        ),
    )
    .await
    .expect("a connection past the cap waited for the idle ones' read timeout");
    assert_eq!(s, StatusCode::OK, "{body}");
    assert!(start.elapsed() < Duration::from_secs(5));
    // The idle ones were closed to make room.
    for s in &mut kept {
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("an idle connection was left open at the cap")
            .unwrap_or(0);
        assert_eq!(n, 0);
    }
}

#[tokio::test]
async fn at_the_cap_an_answer_closes_its_connection() {
    let ex = Exec::start_with(&["--max-connections", "2", "--request-read-timeout", "60s"]).await;
    // One slot held by a request still arriving, one by a connection that
    // has sent nothing yet: the executor is at its cap.
    let mut arriving = connect(&ex).await;
    arriving
        .write_all(b"GET /healthz HTTP/1.1\r\n")
        .await
        .unwrap();
    let mut quiet = connect(&ex).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Its answer says it closes, and it does, so a delivery waiting past
    // the cap is served at once.
    let waiting = tokio::time::timeout(
        Duration::from_secs(10),
        ex.run(
            "create_file",
            json!({"filepath": "b.txt", "content": "x", "reason": "r"}),
        ),
    );
    let answered = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        quiet
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        closed_within(&mut quiet, Duration::from_secs(10))
            .await
            .unwrap()
    };
    let (waited, head) = tokio::join!(waiting, answered);
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    let (s, body) = waited.expect("the delivery past the cap waited for the read timeout");
    assert_eq!(s, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_large_body_without_a_valid_signature_header_is_refused_before_it_is_read() {
    let ex = Exec::start().await;
    let stale = (chrono::Utc::now().timestamp() - 3600).to_string();
    let cases = [
        String::new(),
        format!(
            "webhook-id: act_x\r\nwebhook-timestamp: {stale}\r\nwebhook-signature: v1,AAAA\r\n"
        ),
        format!(
            "webhook-id: act_x\r\nwebhook-timestamp: {}\r\n",
            chrono::Utc::now().timestamp()
        ),
    ];
    for headers in cases {
        let mut s = connect(&ex).await;
        let head = format!(
            "POST / HTTP/1.1\r\nHost: x\r\n{headers}content-length: {}\r\n\r\n",
            16 * 1024 * 1024 - 1
        );
        s.write_all(head.as_bytes()).await.unwrap();
        // Not one byte of the body is sent: the answer must not wait for it.
        let answer = closed_within(&mut s, Duration::from_secs(5)).await;
        let answer = answer.expect("the executor waited for an unsigned body");
        assert!(answer.starts_with("HTTP/1.1 401"), "{headers}: {answer}");
    }
    // Over the limit: 413 at once.
    let mut s = connect(&ex).await;
    let head = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nwebhook-id: a\r\nwebhook-timestamp: {}\r\nwebhook-signature: v1,AAAA\r\ncontent-length: {}\r\n\r\n",
        chrono::Utc::now().timestamp(),
        16 * 1024 * 1024 + 1
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let answer = closed_within(&mut s, Duration::from_secs(5)).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
}
