//! What an `/mcp` request holds of its key: a place among the key's open
//! streams and long-polls (`limits.max_open_per_key`) while it runs, and,
//! when it answers with an event stream (a listen stream, a call waiting
//! for a human, the handshake era's GET stream), for as long as that
//! stream is open; the stream ends once the key is revoked, as `/v1`
//! streams do.

use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use futures::StreamExt;

use actiongate_gate::KeyGuard;

/// `resp` holding `guard` for as long as its body is open, when it is an
/// event stream; otherwise `guard` is let go now.
pub fn until_done(resp: Response, mut guard: KeyGuard) -> Response {
    let streaming = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    if !streaming {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let mut data = body.into_data_stream();
    let body = Body::from_stream(async_stream::stream! {
        loop {
            tokio::select! {
                next = data.next() => match next {
                    Some(chunk) => yield chunk,
                    None => break,
                },
                () = guard.revoked() => break,
            }
        }
    });
    Response::from_parts(parts, body)
}
