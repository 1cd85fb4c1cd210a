//! `/v1/subscriptions`: outbound notification webhooks (admins), and the
//! record of their deliveries.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use actiongate_gate::{Delivery, DeliveryStatus, Subscription};

use crate::auth::Admin;
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery, ApiResult, Problem};
use crate::routes::events::parse_types;
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/subscriptions",
            get(list_subscriptions).post(create_subscription),
        )
        .route(
            "/v1/subscriptions/{id}",
            get(get_subscription).delete(delete_subscription),
        )
        .route("/v1/subscriptions/{id}/deliveries", get(list_deliveries))
}

/// A new subscription.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSubscription {
    /// Where events are POSTed: an `http` or `https` URL.
    pub url: String,
    /// Event types to send: names, `prefix.*` patterns, or `*`.
    pub types: Vec<String>,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// Escalation tier: 1 (default) is sent every event `types` match; 2
    /// only `action.escalated`, for those told when nobody decides in time.
    #[serde(default = "tier_one")]
    #[schema(minimum = 1, maximum = 2)]
    pub tier: u8,
}

fn tier_one() -> u8 {
    1
}

/// A subscription as created: the only time its secret is shown.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedSubscription {
    /// The subscription.
    #[serde(flatten)]
    pub subscription: Subscription,
    /// The Standard Webhooks signing secret (`whsec_…`); shown only now.
    pub secret: String,
}

const MAX_URL: usize = 2048;

fn validate(body: &CreateSubscription) -> Result<(), ApiError> {
    if body.url.len() > MAX_URL {
        return Err(ApiError::invalid("url", format!("at most {MAX_URL} bytes")));
    }
    let url = reqwest::Url::parse(&body.url)
        .map_err(|e| ApiError::invalid("url", format!("not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ApiError::invalid("url", "must be an http or https URL"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ApiError::invalid("url", "must name a host"));
    }
    if body.types.is_empty() {
        return Err(ApiError::invalid(
            "types",
            "name at least one event type (or * for all)",
        ));
    }
    if body.types.len() > 64 {
        return Err(ApiError::invalid("types", "at most 64 entries"));
    }
    parse_types("types", Some(&body.types.join(",")))?;
    if body.description.as_ref().is_some_and(|d| d.len() > 1024) {
        return Err(ApiError::invalid("description", "at most 1024 bytes"));
    }
    Ok(())
}

/// Create a subscription (admins); its secret is returned once.
///
/// Every committed event matching `types` is POSTed to `url` as JSON (the
/// event: `{seq, id, type, at, agent?, action_id?, grant_id?, data}`),
/// signed per Standard Webhooks: `webhook-id` is the event id (the same on
/// every retry), `webhook-timestamp`, `webhook-signature: v1,<base64
/// HMAC-SHA256>`. Delivery is at least once and not necessarily in order:
/// deduplicate by `webhook-id`, order by `seq`.
#[utoipa::path(
    post, path = "/v1/subscriptions", tag = "subscriptions",
    request_body = CreateSubscription,
    responses(
        (status = 201, description = "Created; the secret is shown only now", body = CreatedSubscription),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid URL or type", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn create_subscription(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiJson(body): ApiJson<CreateSubscription>,
) -> ApiResult<Response> {
    validate(&body)?;
    let types = body
        .types
        .iter()
        .map(|t| t.trim().to_owned())
        .collect::<Vec<_>>();
    let (subscription, secret) = state
        .gate()
        .create_subscription(&caller, body.url, types, body.description, body.tier)
        .await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(CreatedSubscription {
            subscription,
            secret,
        }),
    )
        .into_response())
}

/// List subscriptions (admins).
#[utoipa::path(
    get, path = "/v1/subscriptions", tag = "subscriptions",
    responses(
        (status = 200, description = "Every subscription", body = [Subscription]),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn list_subscriptions(
    State(state): State<AppState>,
    Admin(caller): Admin,
) -> ApiResult<axum::Json<Vec<Subscription>>> {
    Ok(axum::Json(state.gate().list_subscriptions(&caller).await?))
}

/// Read a subscription (admins).
#[utoipa::path(
    get, path = "/v1/subscriptions/{id}", tag = "subscriptions",
    params(("id" = String, Path, description = "Subscription id")),
    responses(
        (status = 200, description = "The subscription", body = Subscription),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such subscription", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn get_subscription(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<Subscription>> {
    Ok(axum::Json(
        state.gate().get_subscription(&caller, &id).await?,
    ))
}

/// Delete a subscription and its deliveries (admins).
#[utoipa::path(
    delete, path = "/v1/subscriptions/{id}", tag = "subscriptions",
    params(("id" = String, Path, description = "Subscription id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such subscription", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn delete_subscription(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    state.gate().delete_subscription(&caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Filters and paging of a delivery listing.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesQuery {
    /// Only deliveries in this state.
    pub status: Option<DeliveryStatus>,
    /// Page size, 1-200 (default 50).
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<i64>,
}

/// A page of deliveries, newest event first.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryPage {
    /// The deliveries, each with its attempts.
    pub items: Vec<Delivery>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<i64>,
}

/// List a subscription's deliveries and their attempts (admins).
#[utoipa::path(
    get, path = "/v1/subscriptions/{id}/deliveries", tag = "subscriptions",
    params(("id" = String, Path, description = "Subscription id"), DeliveriesQuery),
    responses(
        (status = 200, description = "A page of deliveries", body = DeliveryPage),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such subscription", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid filter", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn list_deliveries(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<DeliveriesQuery>,
) -> ApiResult<axum::Json<DeliveryPage>> {
    let (items, next_cursor) = state
        .gate()
        .list_deliveries(&caller, &id, q.status, q.cursor, q.limit.unwrap_or(50))
        .await?;
    Ok(axum::Json(DeliveryPage { items, next_cursor }))
}
