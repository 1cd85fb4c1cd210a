//! `GET /v1/grant-requests` and `GET /v1/grants` pages stay within the
//! listing's byte budget (2 MiB of JSON past the first item), as actions
//! and plans do: a page of the largest requests or grants is cut short of
//! its `limit` and links the next, and the CLI (`grant-requests`,
//! `pending`, `grants`) follows the link (docs/api.md).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::cli_support;
use crate::common;

use cli_support::{ag, register_fs};
use common::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// Ids of a JSON array printed by the CLI.
fn ids_of(stdout: &str) -> Vec<String> {
    serde_json::from_str::<Value>(stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A daemon whose scopes may be 600 KiB, with the `fs` handler, and the
/// ids of five items of about 500 KB each (2.5 MB, past one page's 2 MiB)
/// that `post` makes, oldest first: `post(body)` is the path and body of
/// one, given its scope.
async fn five_large(post: impl Fn(Value) -> (&'static str, bool, Value)) -> (TestApp, Vec<String>) {
    let app = TestApp::spawn_with(|s| s.limits.scope_max_bytes = 600 * 1024).await;
    register_fs(&app).await;
    let mut ids = Vec::new();
    for n in 0..5 {
        let scope = json!({"path": format!("/srv/{n}/{}", "p".repeat(500_000))});
        let (path, by_agent, body) = post(scope);
        let key = if by_agent { &app.agent } else { &app.operator };
        let (s, r) = app.call(Method::POST, path, Some(key), Some(body)).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
        let item = r.get("grant").unwrap_or(&r);
        ids.push(item["id"].as_str().unwrap().to_owned());
    }
    (app, ids)
}

/// Follows `GET path` page by page as a client would (its `Link` to the
/// next when cut short, keeping the query): every id, and how many pages
/// it took.
async fn follow(app: &TestApp, key: &str, mut path: String) -> (Vec<String>, usize) {
    let query: Vec<String> = path
        .split_once('?')
        .map(|(_, q)| q.split('&').map(str::to_owned).collect())
        .unwrap_or_default();
    let mut ids = Vec::new();
    let mut pages = 0;
    loop {
        let resp = app.send(Method::GET, &path, Some(key), None).await;
        assert_eq!(resp.status(), StatusCode::OK);
        let link = resp
            .headers()
            .get("link")
            .map(|l| l.to_str().unwrap().to_owned());
        let body = resp.bytes().await.unwrap();
        let page: Vec<Value> = serde_json::from_slice(&body).unwrap();
        assert!(!page.is_empty() && page.len() < 5, "{} items", page.len());
        // Past its first item, a page holds at most 2 MiB of JSON.
        let first = serde_json::to_vec(&page[0]).unwrap().len();
        assert!(body.len() - first <= 2 << 20, "{} bytes", body.len());
        pages += 1;
        ids.extend(page.iter().map(|r| r["id"].as_str().unwrap().to_owned()));
        let Some(link) = link else { break };
        assert!(link.ends_with("; rel=\"next\""), "{link}");
        assert!(
            link.contains(&format!("after={}", ids.last().unwrap())),
            "{link}"
        );
        for pair in query.iter().filter(|p| !p.starts_with("after=")) {
            assert!(link.contains(pair.as_str()), "{pair} not in {link}");
        }
        path = link
            .trim_start_matches('<')
            .split_once('>')
            .unwrap()
            .0
            .to_owned();
        assert!(pages < 10, "never ended");
    }
    (ids, pages)
}

#[tokio::test]
async fn a_page_of_large_grant_requests_is_cut_short_and_links_the_next() {
    let (app, ids) = five_large(|scope| {
        let body = json!({"handler": "fs", "permission": "fs.use",
            "scope": scope, "reason": "publish", "expires": "2h"});
        ("/v1/grant-requests", true, body)
    })
    .await;
    let op = app.operator.clone();
    let oldest = "/v1/grant-requests?status=pending&order=oldest&limit=500";
    let (listed, pages) = follow(&app, &op, oldest.into()).await;
    assert_eq!(listed, ids);
    assert!(pages > 1);
    // The agent's own listing is cut the same way.
    let agent = app.agent.clone();
    let (listed, _) = follow(&app, &agent, "/v1/grant-requests?order=oldest".into()).await;
    assert_eq!(listed, ids);
    // The CLI follows the link: every request, and the whole count.
    let r = ag(&app, &op, &["grant-requests", "--json"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(ids_of(&r.stdout), ids);
    let r = ag(&app, &op, &["pending"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("5 grant requests wait too"),
        "{}",
        r.stdout
    );
    app.stop().await;
}

#[tokio::test]
async fn a_page_of_large_grants_is_cut_short_and_links_the_next() {
    let (app, ids) = five_large(|scope| {
        let body = json!({"handler": "fs", "permission": "fs.use", "agent": "agent-1",
            "scope": scope, "expires": "2h"});
        ("/v1/grants", false, body)
    })
    .await;
    let op = app.operator.clone();
    let (listed, pages) = follow(&app, &op, "/v1/grants?order=oldest&active=true".into()).await;
    assert_eq!(listed, ids);
    assert!(pages > 1);
    // The CLI lists them all, newest first.
    let r = ag(&app, &op, &["grants", "--json"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let mut newest_first = ids.clone();
    newest_first.reverse();
    assert_eq!(ids_of(&r.stdout), newest_first);
    app.stop().await;
}
