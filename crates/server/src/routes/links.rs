//! `Link: <…>; rel="next"` (RFC 8288) on a page of a listing cut short of
//! its `limit` for its size, or whose cursor needs more than an id.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

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

/// A page of a listing paged by `after=<last id>` as JSON, linking the
/// page after its last item when the gate `cut` it short for its size.
pub(crate) fn after_page<T: serde::Serialize>(
    path: &str,
    query: Option<&str>,
    items: Vec<T>,
    cut: bool,
    id: impl Fn(&T) -> &str,
) -> Response {
    let next = items
        .last()
        .filter(|_| cut)
        .map(|last| next_link(path, query, &[("after", id(last))]));
    linked(axum::Json(items).into_response(), next)
}
