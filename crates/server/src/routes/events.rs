//! `/v1/events` and `/v1/actions/{id}/events`: Server-Sent Event streams of
//! the event log (see [`crate::sse`] for how they resume without gaps).

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use serde::Deserialize;
use utoipa::IntoParams;

use actiongate_gate::events::TypeFilter;

use crate::auth::Caller;
use crate::error::{ApiError, ApiPath, ApiQuery, ApiResult, Problem};
use crate::sse::{self, Scope, Start, Timing};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/events", get(stream_events))
        .route("/v1/actions/{id}/events", get(action_events))
}

/// Filters and resume point of `GET /v1/events`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Comma-separated event types or `prefix.*` patterns, e.g.
    /// `action.*,grant.created` (default: all).
    pub types: Option<String>,
    /// Resume after this event seq; the `Last-Event-ID` header wins.
    #[param(minimum = 0)]
    pub last_event_id: Option<i64>,
}

/// Parses a comma-separated type filter as field `field`.
pub fn parse_types(field: &str, text: Option<&str>) -> Result<TypeFilter, ApiError> {
    let items: Vec<&str> = text
        .map(|t| {
            t.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    TypeFilter::parse(items).map_err(|e| ApiError::invalid(field, e))
}

fn timing(state: &AppState) -> Result<Timing, ApiError> {
    let ev = &state.settings().events;
    Ok(Timing {
        heartbeat: ev.heartbeat.get(),
        retry: ev.retry.get(),
    })
}

fn last_event_id(headers: &HeaderMap, query: Option<i64>) -> Result<Option<i64>, ApiError> {
    // The query is checked even when the header wins over it.
    if query.is_some_and(|q| q < 0) {
        return Err(ApiError::invalid(
            "last_event_id",
            "must be the id (seq) of an event",
        ));
    }
    let parsed = match headers.get("last-event-id") {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok())
                .ok_or_else(|| {
                    ApiError::invalid("Last-Event-ID", "must be the id (seq) of an event")
                })?,
        ),
        None => query,
    };
    match parsed {
        Some(id) if id < 0 => Err(ApiError::invalid(
            "last_event_id",
            "must be the id (seq) of an event",
        )),
        other => Ok(other),
    }
}

/// Stream events (SSE): operators see every event, agents their own.
///
/// Each message has `id:` (the event seq), `event:` (its type) and `data:`
/// (the event as JSON: `{seq, id, type, at, agent?, action_id?, grant_id?,
/// data}`). The stream starts with a `retry:` hint and sends a comment
/// every heartbeat. With `Last-Event-ID` (or `?last_event_id=`) it replays
/// every later event the caller may see, then follows live events, with no
/// gap and no duplicate. If that id is older than the retained log (or not
/// from this log) the first message is an `event: reset` whose data names
/// `oldest_seq`, and the stream continues from there. A client too slow to
/// keep up is disconnected and resumes from its last id.
#[utoipa::path(
    get, path = "/v1/events", tag = "events",
    params(
        EventsQuery,
        ("Last-Event-ID" = Option<i64>, Header, nullable = false, minimum = 0, description = "Resume after this event seq (wins over ?last_event_id)"),
    ),
    responses(
        (status = 200, description = "An event stream", body = SseMessage, content_type = "text/event-stream",
            headers(("actiongate-heartbeat-ms" = u64, description = "The period of the stream's idle heartbeat comments (events.heartbeat), in milliseconds: a stream silent for much longer is dead"),
                ("actiongate-resume-after" = i64, description = "The seq this stream starts after (the newest when no last id was given, the oldest left after a reset): a client that loses the stream before any event arrives resumes from it with Last-Event-ID, missing nothing"))),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "An agent-role key bound to no agent", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Unknown type or invalid last id", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The key holds limits.max_open_per_key streams and long-polls open already", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn stream_events(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> ApiResult<Response> {
    let agent = if caller.sees_all() {
        None
    } else {
        Some(caller.agent_id()?.to_owned())
    };
    let types = parse_types("types", q.types.as_deref())?;
    let last_id = last_event_id(&headers, q.last_event_id)?;
    let timing = timing(&state)?;
    let guard = state.gate().key_guard(&caller)?;
    // Subscribe before anything is read, so nothing falls between the two.
    let rx = state
        .events_hub()
        .subscribe()
        .ok_or_else(ApiError::internal)?;
    let newest = state.gate().event_log().last_seq();
    let start = match last_id {
        None => Start {
            after: newest,
            reset: None,
        },
        Some(id) => {
            let anchor = state.gate().event_log().audit_anchor().await?;
            // A replay reads committed rows that may not be published yet,
            // so a client can hold an id above `newest`: ask the database.
            let reason = if id < anchor.seq {
                Some("pruned")
            } else if id > newest && id > state.gate().event_log().newest_seq().await? {
                Some("unknown")
            } else {
                None
            };
            match reason {
                None => Start {
                    after: id,
                    reset: None,
                },
                Some(reason) => Start {
                    after: anchor.seq,
                    reset: Some(sse::reset_notice(reason, id, anchor.seq)),
                },
            }
        }
    };
    let scope = Scope { agent, types };
    let after = start.after;
    let mut resp = sse::response(
        sse::log_stream(
            state.gate().event_log(),
            rx,
            scope,
            start,
            timing,
            state.gate().shutdown().clone(),
            guard,
        ),
        timing.heartbeat,
    );
    resp.headers_mut()
        .insert(sse::RESUME_HEADER, axum::http::HeaderValue::from(after));
    Ok(resp)
}

/// Stream one action's events (SSE): its history, then live events; the
/// stream ends once the action settles.
#[utoipa::path(
    get, path = "/v1/actions/{id}/events", tag = "events",
    params(("id" = String, Path, description = "Action id")),
    responses(
        (status = 200, description = "The action's event stream", body = SseMessage, content_type = "text/event-stream",
            headers(("actiongate-heartbeat-ms" = u64, description = "The period of the stream's idle heartbeat comments (events.heartbeat), in milliseconds"))),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such action visible to the caller", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The key holds limits.max_open_per_key streams and long-polls open already", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn action_events(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let timing = timing(&state)?;
    let guard = state.gate().key_guard(&caller)?;
    let rx = state
        .events_hub()
        .subscribe()
        .ok_or_else(ApiError::internal)?;
    // Read the action before its history: if it is settled now, the event
    // that settled it is in the history.
    let action = state.gate().visible_action(&caller, &id).await?;
    let history = state.gate().event_log().action_events(&id).await?;
    Ok(sse::response(
        sse::action_stream(
            id,
            rx,
            history,
            action.is_settled(),
            timing,
            state.gate().shutdown().clone(),
            guard,
        ),
        timing.heartbeat,
    ))
}

/// One message of an event stream, as an SSE client parses it: `id` is the
/// event's `seq`, `event` its type (or `reset`), `data` the event as JSON
/// text (`{seq, id, type, at, agent?, action_id?, grant_id?, data}`).
#[derive(Debug, utoipa::ToSchema)]
#[allow(dead_code)] // describes the wire format for the OpenAPI document
pub struct SseMessage {
    /// The event's seq (absent on `reset`).
    pub id: Option<String>,
    /// The event type, or `reset`.
    pub event: Option<String>,
    /// JSON text of the event, or of the reset notice.
    pub data: String,
    /// Reconnection hint in milliseconds (first message only).
    pub retry: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_negative_query_id_is_refused_even_beside_the_header() {
        let mut headers = HeaderMap::new();
        headers.insert("last-event-id", axum::http::HeaderValue::from_static("0"));
        assert!(last_event_id(&headers, Some(-1)).is_err());
        assert_eq!(last_event_id(&headers, Some(5)).ok(), Some(Some(0)));
        assert!(last_event_id(&HeaderMap::new(), Some(-1)).is_err());
    }
}
