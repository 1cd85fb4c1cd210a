//! The operator's web page over real HTTP: served without a key, every file
//! with its content type, a strict Content-Security-Policy, `nosniff`,
//! revalidation by ETag, and nothing loaded from another origin.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;

use common::TestApp;
use regex::Regex;
use reqwest::{Method, StatusCode, header};

async fn get(app: &TestApp, path: &str) -> reqwest::Response {
    app.send(Method::GET, path, None, None).await
}

fn header_of(resp: &reqwest::Response, name: header::HeaderName) -> String {
    resp.headers()
        .get(&name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
        .to_owned()
}

/// The headers every page response must carry.
fn assert_hardened(resp: &reqwest::Response, what: &str) {
    let csp = header_of(resp, header::CONTENT_SECURITY_POLICY);
    assert!(csp.starts_with("default-src 'self';"), "{what}: {csp}");
    assert!(csp.contains("script-src 'self'"), "{what}: {csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{what}: {csp}");
    assert!(!csp.contains("unsafe"), "{what}: {csp}");
    assert_eq!(
        header_of(resp, header::X_CONTENT_TYPE_OPTIONS),
        "nosniff",
        "{what}"
    );
    assert_eq!(header_of(resp, header::CACHE_CONTROL), "no-cache", "{what}");
    assert!(header_of(resp, header::ETAG).starts_with('"'), "{what}");
}

#[tokio::test]
async fn the_page_and_every_asset_it_loads_are_served_with_their_types_and_csp() {
    let app = TestApp::spawn().await;
    // The page needs no key (it holds no data); the API it calls does.
    let resp = get(&app, "/").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        header_of(&resp, header::CONTENT_TYPE),
        "text/html; charset=utf-8"
    );
    assert_hardened(&resp, "/");
    let html = resp.text().await.unwrap();
    let (status, _) = app.call(Method::GET, "/v1/whoami", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // No inline script or style: every <script> has a src, no style attributes.
    let script = Regex::new(r"<script\b[^>]*>").unwrap();
    let tags: Vec<&str> = script.find_iter(&html).map(|m| m.as_str()).collect();
    assert!(!tags.is_empty());
    assert!(
        tags.iter().all(|t| t.contains("src=\"/assets/")),
        "{tags:?}"
    );
    assert!(!html.contains("<style") && !html.contains(" style="));

    // Follow every asset the page references, and every module import.
    let refs = Regex::new(r#"(?:src|href)="/assets/([^"]+)""#).unwrap();
    let import = Regex::new(r#"from '\./([^']+)'"#).unwrap();
    let manifest_src = Regex::new(r#""src": "/assets/([^"]+)""#).unwrap();
    let mut todo: Vec<String> = refs.captures_iter(&html).map(|c| c[1].to_owned()).collect();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let resp = get(&app, &format!("/assets/{name}")).await;
        assert_eq!(resp.status(), StatusCode::OK, "{name}");
        let expected = match name.rsplit('.').next().unwrap() {
            "js" => "text/javascript; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            "svg" => "image/svg+xml",
            "png" => "image/png",
            "webmanifest" => "application/manifest+json",
            other => panic!("unexpected asset type {other}"),
        };
        assert_eq!(header_of(&resp, header::CONTENT_TYPE), expected, "{name}");
        assert_hardened(&resp, &name);
        let bytes = resp.bytes().await.unwrap();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        // Works offline: nothing from another origin (the SVG namespace is a name, not a load).
        let without_ns = text.replace("http://www.w3.org/2000/svg", "");
        assert!(
            !without_ns.contains("http://") && !without_ns.contains("https://"),
            "{name} refers to another origin"
        );
        if name.ends_with(".js") {
            todo.extend(import.captures_iter(&text).map(|c| c[1].to_owned()));
        }
        // The web app manifest's icons.
        if name.ends_with(".webmanifest") {
            todo.extend(manifest_src.captures_iter(&text).map(|c| c[1].to_owned()));
        }
    }
    for expected in [
        "app.js",
        "app.css",
        "icon.svg",
        "api.js",
        "stream.js",
        "views.js",
        "dom.js",
        "secrets.js",
        "cards.js",
        "queue.js",
        "risk.js",
        "remember.js",
        "diff.js",
        "notify.js",
        "manifest.webmanifest",
        "icon-192.png",
        "icon-512.png",
    ] {
        assert!(seen.contains(expected), "{expected} not reached: {seen:?}");
    }
}

#[tokio::test]
async fn an_unchanged_file_is_revalidated_with_304_and_unknown_assets_are_404() {
    let app = TestApp::spawn().await;
    let first = get(&app, "/assets/app.js").await;
    let etag = header_of(&first, header::ETAG);
    let again = app
        .client
        .get(format!("{}/assets/app.js", app.base))
        .header(header::IF_NONE_MATCH, &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(header_of(&again, header::ETAG), etag);
    assert_hardened(&again, "304");
    assert!(again.bytes().await.unwrap().is_empty());

    let stale = app
        .client
        .get(format!("{}/assets/app.js", app.base))
        .header(header::IF_NONE_MATCH, "\"something-else\"")
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), StatusCode::OK);

    for path in [
        "/assets/nope.js",
        "/assets/index.html",
        "/assets/..%2fweb.rs",
    ] {
        let resp = get(&app, path).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
        assert_eq!(
            header_of(&resp, header::CONTENT_TYPE),
            "application/problem+json",
            "{path}"
        );
    }
}
