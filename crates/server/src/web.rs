//! The operator's web page: `/` and its assets under `/assets/`, embedded in
//! the binary so the page works with no network beyond the daemon.
//!
//! The page holds no data, so its routes need no key; every API call the
//! page makes sends the operator's bearer key. Each response carries a strict
//! Content-Security-Policy (only this origin, no inline script or style),
//! `nosniff`, and an `ETag` with `Cache-Control: no-cache`: browsers keep
//! the files but revalidate them, so a new daemon version is picked up at
//! once and an unchanged file costs a 304.

use std::sync::OnceLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use crate::error::{ApiError, ApiPath};
use crate::state::AppState;

/// The policy sent with every page response: scripts, styles, images and
/// API calls from this origin only; never framed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    name: &'static str,
    body: &'static [u8],
}

/// An embedded file of `crates/server/web/`.
macro_rules! asset {
    ($name:literal) => {
        Asset {
            name: $name,
            body: include_bytes!(concat!("../web/", $name)),
        }
    };
}

/// Every file of the page; `index.html` (the first) is served at `/`.
const ASSETS: &[Asset] = &[
    asset!("index.html"),
    asset!("app.css"),
    asset!("app.js"),
    asset!("api.js"),
    asset!("stream.js"),
    asset!("views.js"),
    asset!("dom.js"),
    asset!("secrets.js"),
    asset!("cards.js"),
    asset!("queue.js"),
    asset!("backlog.js"),
    asset!("risk.js"),
    asset!("remember.js"),
    asset!("edit.js"),
    asset!("diff.js"),
    asset!("notify.js"),
    asset!("plans.js"),
    asset!("sessions.js"),
    asset!("profile.js"),
    asset!("manifest.webmanifest"),
    asset!("icon-192.png"),
    asset!("icon-512.png"),
    asset!("icon.svg"),
];

/// The content type of an asset, by its extension.
fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("webmanifest") => "application/manifest+json",
        _ => "application/octet-stream",
    }
}

/// Routes of the page.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/assets/{name}", get(asset))
}

fn etags() -> &'static [String] {
    static ETAGS: OnceLock<Vec<String>> = OnceLock::new();
    ETAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| format!("\"{}\"", hex::encode(&Sha256::digest(a.body)[..12])))
            .collect()
    })
}

async fn index(headers: HeaderMap) -> Response {
    serve(0, &headers)
}

async fn asset(ApiPath(name): ApiPath<String>, headers: HeaderMap) -> Response {
    // index.html is only served at `/`, so the page has one address.
    match ASSETS
        .iter()
        .position(|a| a.name == name && a.name != "index.html")
    {
        Some(i) => serve(i, &headers),
        None => ApiError::not_found(format!("no asset '{name}'")).into_response(),
    }
}

fn serve(i: usize, headers: &HeaderMap) -> Response {
    let asset = &ASSETS[i];
    let etag = &etags()[i];
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(content_type(asset.name)),
            )],
            asset.body,
        )
            .into_response()
    };
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    resp
}

#[cfg(test)]
mod tests {
    /// The page marks the same letters as drawn like Latin ones as the
    /// CLI and the chats do: its `READS_AS_LATIN` is the daemon's
    /// `latin_lookalike_letters`, as `\u{…}` escapes.
    #[test]
    fn the_page_knows_the_letters_drawn_like_latin_ones() {
        let dom = include_str!("../web/dom.js");
        let expected: String = actiongate_api::text::latin_lookalike_letters()
            .map(|c| format!("\\u{{{:x}}}", u32::from(c)))
            .collect();
        let got = dom
            .split_once("const READS_AS_LATIN = new Set('")
            .and_then(|(_, rest)| rest.split_once("')"))
            .map(|(set, _)| set);
        assert_eq!(got, Some(expected.as_str()), "dom.js's READS_AS_LATIN");
    }
}
