//! `limits.max_in_flight_per_key`: how many of one key's requests the
//! daemon answers at once. A request that carries a key is authenticated
//! here, once, before its route (the [`Caller`] extractor takes the
//! result), and holds a place among its key's requests in flight until its
//! answer is ready; past the limit it is answered 429 `limit-reached` and
//! nothing else is done. Requests that wait (`?wait=` long-polls and
//! `/mcp`) hold a place in `limits.max_open_per_key` instead, and a
//! request whose key is unknown is left to its route's extractor, which
//! refuses it.

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::{HeaderValue, Uri, header::AUTHORIZATION};
use axum::response::{IntoResponse, Response};
use futures::future::{BoxFuture, Either};
use tower::{Layer, Service};

use actiongate_gate::{Caller, GateError};

use crate::error::ApiError;
use crate::state::AppState;

/// What authenticating a request's key said, for the [`Caller`] extractor.
#[derive(Debug, Clone)]
pub struct Authenticated(pub Result<Caller, GateError>);

/// The layer counting each key's requests in flight.
#[derive(Clone)]
pub struct InFlightLayer {
    state: AppState,
}

impl InFlightLayer {
    /// Counting in `state`'s gate.
    pub fn new(state: AppState) -> InFlightLayer {
        InFlightLayer { state }
    }
}

impl<S> Layer<S> for InFlightLayer {
    type Service = InFlight<S>;

    fn layer(&self, inner: S) -> InFlight<S> {
        InFlight {
            inner,
            state: self.state.clone(),
        }
    }
}

/// A service whose requests [`InFlightLayer`] counts.
#[derive(Clone)]
pub struct InFlight<S> {
    inner: S,
    state: AppState,
}

impl<S> Service<Request> for InFlight<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        let token = match req.headers().get(AUTHORIZATION).map(bearer) {
            Some(Ok(token)) if !waits(req.uri()) => token.to_owned(),
            _ => return Either::Left(self.inner.call(req)),
        };
        // The clone is the one made ready next time; this one was.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let state = self.state.clone();
        Either::Right(Box::pin(async move {
            let authenticated = state.gate().authenticate(&token).await;
            let held = match &authenticated {
                Ok(caller) => match state.gate().in_flight(caller) {
                    Ok(held) => Some(held),
                    Err(e) => return Ok(ApiError::from(e).into_response()),
                },
                Err(_) => None,
            };
            req.extensions_mut().insert(Authenticated(authenticated));
            let resp = inner.call(req).await;
            drop(held);
            resp
        }))
    }
}

/// The key of an `Authorization: Bearer <key>` header.
pub fn bearer(header: &HeaderValue) -> Result<&str, ApiError> {
    let value = header
        .to_str()
        .map_err(|_| ApiError::unauthorized("the Authorization header is not text"))?;
    // The scheme's name is case-insensitive (RFC 9110, 11.1).
    value
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::unauthorized("use the Bearer scheme: Authorization: Bearer <key>"))
}

/// Whether a request to `uri` may wait, holding a place among its key's
/// open streams and long-polls instead: `/mcp`, or a positive `wait`.
fn waits(uri: &Uri) -> bool {
    uri.path() == "/mcp"
        || uri.query().is_some_and(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .any(|(k, v)| k == "wait" && v.parse::<u64>().is_ok_and(|s| s > 0))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_polls_and_mcp_wait_and_everything_else_is_counted() {
        for (uri, waits_here) in [
            ("/v1/actions/x?wait=30", true),
            ("/v1/events?after=3&wait=5", true),
            ("/mcp", true),
            ("/v1/actions/x?wait=0", false),
            ("/v1/actions/x?wait=soon", false),
            ("/v1/actions/x", false),
            ("/v1/check", false),
            ("/mcp/other", false),
            ("/v1/actions?await=3", false),
        ] {
            let uri: Uri = uri.parse().unwrap_or_else(|e| panic!("{uri}: {e}"));
            assert_eq!(waits(&uri), waits_here, "{uri}");
        }
    }
}
