//! `Link: <…>; rel="next"` (RFC 8288) on a page of a listing cut short of
//! its `limit` for its size, or whose cursor needs more than an id.

use axum::http::{HeaderValue, header};
use axum::response::Response;

/// `resp` with its `Link` to the next page, when there is one.
pub(crate) fn linked(mut resp: Response, next: Option<String>) -> Response {
    if let Some(link) = next.and_then(|l| HeaderValue::from_str(&l).ok()) {
        resp.headers_mut().insert(header::LINK, link);
    }
    resp
}

/// The `Link` (RFC 8288) to the page after this one: the same query, with
/// `cursor`'s parameters set to where this page ended.
pub(crate) fn next_link(path: &str, query: Option<&str>, cursor: &[(&str, &str)]) -> String {
    let mut next = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        if !cursor.iter().any(|(name, _)| *name == k) {
            next.append_pair(&k, &v);
        }
    }
    for (k, v) in cursor {
        next.append_pair(k, v);
    }
    format!("<{path}?{}>; rel=\"next\"", next.finish())
}
