//! `GET /v1/handlers` is paged like the other listings: by id, `limit`
//! (1-500) and `after=<last id>`, and a page of the largest registrations
//! is cut short of its limit to stay within 2 MiB of JSON and links the
//! next (docs/api.md).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// A registration of about `bytes` (its action's params schema carries a
/// long description).
fn handler(id: &str, bytes: usize) -> Value {
    json!({
        "id": id,
        "name": id,
        "url": "http://127.0.0.1:9/hook",
        "permissions": [{"name": "use", "parameters_schema": {"type": "object"}}],
        "actions": [{
            "name": "run",
            "params_schema": {"type": "object", "description": "d".repeat(bytes)},
            "permission": "use",
            "detail": "run"
        }]
    })
}

fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap())
        .collect()
}

async fn page(app: &TestApp, query: &str) -> (StatusCode, Option<String>, Value) {
    let resp = app
        .send(
            Method::GET,
            &format!("/v1/handlers{query}"),
            Some(&app.admin),
            None,
        )
        .await;
    let status = resp.status();
    let link = resp
        .headers()
        .get("link")
        .map(|l| l.to_str().unwrap().to_owned());
    (status, link, resp.json().await.unwrap())
}

#[tokio::test]
async fn handlers_are_listed_a_page_at_a_time_within_the_byte_budget() {
    let app = TestApp::spawn().await;
    for (id, bytes) in [("h-a", 100), ("h-b", 100), ("h-c", 100)] {
        let (s, b) = app
            .call(
                Method::POST,
                "/v1/handlers",
                Some(&app.admin),
                Some(handler(id, bytes)),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
    }
    let (s, link, first) = page(&app, "?limit=2").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(ids(&first), ["h-a", "h-b"]);
    assert_eq!(link, None, "a page cut by its limit links nothing");
    let (_, _, rest) = page(&app, "?limit=2&after=h-b").await;
    assert_eq!(ids(&rest), ["h-c"]);
    // Retired handlers only when asked, in the same order.
    let (s, _) = app
        .call(Method::DELETE, "/v1/handlers/h-b", Some(&app.admin), None)
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(ids(&page(&app, "").await.2), ["h-a", "h-c"]);
    assert_eq!(
        ids(&page(&app, "?include_retired=true&after=h-a").await.2),
        ["h-b", "h-c"]
    );
    for (query, field) in [
        ("?limit=0", "limit"),
        ("?limit=501", "limit"),
        ("?after=%20", "after"),
    ] {
        let (s, _, p) = page(&app, query).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{query}: {p}");
        assert!(p.to_string().contains(field), "{query}: {p}");
    }

    // Three registrations of about 900 KB: two fill a page's 2 MiB, which
    // links the next; following the links reads every one once.
    for id in ["big-1", "big-2", "big-3"] {
        let (s, b) = app
            .call(
                Method::POST,
                "/v1/handlers",
                Some(&app.admin),
                Some(handler(id, 900_000)),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
    }
    let (_, link, first) = page(&app, "").await;
    assert_eq!(ids(&first), ["big-1", "big-2"]);
    let link = link.expect("a page cut for its size links the next");
    assert!(
        link.contains("after=big-2") && link.contains("rel=\"next\""),
        "{link}"
    );
    let (_, link, next) = page(&app, "?after=big-2").await;
    assert_eq!(ids(&next), ["big-3", "h-a", "h-c"]);
    assert_eq!(link, None);
    app.stop().await;
}
