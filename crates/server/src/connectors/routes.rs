//! The chats' webhooks. Each checks its chat's signature (or secret token)
//! before reading anything else; a forged or stale request gets 401 and
//! decides nothing. A webhook of a connector that is off is "not found".

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::{Connectors, discord, slack, telegram, whatsapp};
use crate::config::TelegramMode;
use crate::error::ApiError;

/// The webhook routes over `c`.
pub fn router<S: Clone + Send + Sync + 'static>(c: Arc<Connectors>) -> Router<S> {
    Router::new()
        .route("/v1/connectors/telegram/webhook", post(telegram_webhook))
        .route(
            "/v1/connectors/slack/interactivity",
            post(slack_interactivity),
        )
        .route("/v1/connectors/slack/events", post(slack_events))
        .route(
            "/v1/connectors/discord/interactions",
            post(discord_interactions),
        )
        .route(
            "/v1/connectors/whatsapp/webhook",
            post(whatsapp_webhook).get(whatsapp_verify),
        )
        .with_state(c)
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> &'a str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Whether two secrets are equal, in time independent of where they differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    let (Ok(mut x), Ok(mut y)) = (
        Hmac::<Sha256>::new_from_slice(b"actiongate-compare"),
        Hmac::<Sha256>::new_from_slice(b"actiongate-compare"),
    ) else {
        return false;
    };
    x.update(a.as_bytes());
    y.update(b.as_bytes());
    y.verify_slice(&x.finalize().into_bytes()).is_ok()
}

fn forged() -> Response {
    ApiError::unauthorized("the request's signature does not verify").into_response()
}

fn off() -> Response {
    ApiError::not_found("this connector is not configured").into_response()
}

fn json_of(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|_| ApiError::bad_request("the body is not JSON"))
}

async fn telegram_webhook(State(c): State<Arc<Connectors>>, h: HeaderMap, body: Bytes) -> Response {
    let Some(t) = &c.telegram else { return off() };
    if t.mode() != TelegramMode::Webhook {
        return off();
    }
    if !same_secret(
        header(&h, "x-telegram-bot-api-secret-token"),
        t.webhook_secret(),
    ) {
        return forged();
    }
    let update = match json_of(&body) {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    if let Some(id) = update.get("update_id").and_then(Value::as_i64) {
        match c
            .gate
            .connector_first_seen(telegram::CHAT, &format!("u:{id}"))
            .await
        {
            Ok(true) => telegram::handle_update(&c, &update).await,
            Ok(false) => {}
            Err(_) => return ApiError::unavailable("try again").into_response(),
        }
    }
    StatusCode::OK.into_response()
}

async fn slack_interactivity(
    State(c): State<Arc<Connectors>>,
    h: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(s) = &c.slack else { return off() };
    let ts = header(&h, "x-slack-request-timestamp");
    let sig = header(&h, "x-slack-signature");
    if !s.verify(ts, sig, &body, now()) {
        return forged();
    }
    let form: HashMap<String, String> = match serde_urlencoded::from_bytes(&body) {
        Ok(f) => f,
        Err(_) => return ApiError::bad_request("the body is not a form").into_response(),
    };
    let payload = match form.get("payload").map(|p| json_of(p.as_bytes())) {
        Some(Ok(v)) => v,
        _ => return ApiError::invalid("payload", "a JSON interaction payload").into_response(),
    };
    slack::handle_interaction(&c, &payload).await;
    StatusCode::OK.into_response()
}

async fn slack_events(State(c): State<Arc<Connectors>>, h: HeaderMap, body: Bytes) -> Response {
    let Some(s) = &c.slack else { return off() };
    let ts = header(&h, "x-slack-request-timestamp");
    let sig = header(&h, "x-slack-signature");
    if !s.verify(ts, sig, &body, now()) {
        return forged();
    }
    let payload = match json_of(&body) {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    match payload.get("type").and_then(Value::as_str) {
        // Slack checks the Request URL with a signed challenge.
        Some("url_verification") => {
            let challenge = payload.get("challenge").cloned().unwrap_or(Value::Null);
            axum::Json(serde_json::json!({ "challenge": challenge })).into_response()
        }
        Some("event_callback") => {
            // Only a reply that decides is remembered (a retried delivery
            // carries the same message ts): most messages are not for us.
            slack::handle_event(&c, &payload, now()).await;
            StatusCode::OK.into_response()
        }
        _ => StatusCode::OK.into_response(),
    }
}

async fn discord_interactions(
    State(c): State<Arc<Connectors>>,
    h: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(d) = c.discord.as_ref().filter(|d| d.takes_http_interactions()) else {
        return off();
    };
    let ts = header(&h, "x-signature-timestamp");
    let sig = header(&h, "x-signature-ed25519");
    if !d.verify(ts, sig, &body, now()) {
        return forged();
    }
    let interaction = match json_of(&body) {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    let answer = discord::handle_interaction(&c, &interaction)
        .await
        .unwrap_or_else(|| discord::ephemeral("Already handled."));
    axum::Json(answer).into_response()
}

async fn whatsapp_verify(
    State(c): State<Arc<Connectors>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let Some(w) = &c.whatsapp else { return off() };
    let get = |k: &str| q.get(k).map(String::as_str).unwrap_or("");
    if get("hub.mode") == "subscribe" && w.verify_token_matches(get("hub.verify_token")) {
        get("hub.challenge").to_owned().into_response()
    } else {
        ApiError::forbidden("the verify token does not match").into_response()
    }
}

async fn whatsapp_webhook(State(c): State<Arc<Connectors>>, h: HeaderMap, body: Bytes) -> Response {
    let Some(w) = &c.whatsapp else { return off() };
    if !w.verify(header(&h, "x-hub-signature-256"), &body) {
        return forged();
    }
    let payload = match json_of(&body) {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    whatsapp::handle_webhook(&c, &payload, now()).await;
    StatusCode::OK.into_response()
}
