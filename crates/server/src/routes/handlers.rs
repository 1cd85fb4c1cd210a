//! `/v1/handlers`: executors register the actions they perform and the
//! permissions those need (admins).

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use actiongate_gate::{HandlerRecord, ListPage};

use crate::auth::Admin;
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery, ApiResult, Problem};
use crate::routes::links::after_page;
use crate::state::AppState;
use actiongate_api::{ActionDecl, HandlerRegistration, PermissionDecl};
use actiongate_gate::handler_spec;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/handlers", post(create_handler).get(list_handlers))
        .route(
            "/v1/handlers/{id}",
            get(get_handler).put(replace_handler).delete(retire_handler),
        )
        .route("/v1/handlers/{id}/rotate-secret", post(rotate_secret))
}

/// A handler as shown: its registration, never its secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct HandlerView {
    /// Slug id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// Webhook URL.
    pub url: String,
    /// Per-attempt timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Declared permissions.
    pub permissions: Vec<PermissionDecl>,
    /// Declared actions.
    pub actions: Vec<ActionDecl>,
    /// When registered.
    pub created_at: DateTime<Utc>,
    /// When last replaced.
    pub updated_at: DateTime<Utc>,
    /// When retired.
    pub retired_at: Option<DateTime<Utc>>,
    /// In the answers to `POST` and `PUT` only: what in the registration
    /// cannot work as things stand, such as an action's `approvals` needing
    /// more approvals than there are people who may give them (its actions
    /// could never be approved). The registration is kept all the same.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A newly registered handler and its webhook secret, shown only now.
#[derive(Debug, Serialize, ToSchema)]
pub struct RegisteredHandler {
    /// The handler.
    #[serde(flatten)]
    pub handler: HandlerView,
    /// `whsec_…`: verifies the daemon's webhooks and signs async results. Store it now.
    pub secret: String,
}

fn view(record: &HandlerRecord) -> Result<HandlerView, ApiError> {
    let reg = handler_spec::registration_of(record)?;
    Ok(HandlerView {
        id: record.id.clone(),
        name: record.name.clone(),
        description: record.description.clone(),
        url: record.url.clone(),
        timeout: reg.timeout,
        permissions: reg.permissions,
        actions: reg.actions,
        created_at: record.created_at,
        updated_at: record.updated_at,
        retired_at: record.retired_at,
        warnings: Vec::new(),
    })
}

/// Register a handler (admins); the response carries its secret, once.
#[utoipa::path(
    post, path = "/v1/handlers", tag = "handlers",
    request_body = HandlerRegistration,
    responses(
        (status = 201, description = "Registered", body = RegisteredHandler),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The id is taken", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid registration (names the place)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn create_handler(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiJson(reg): ApiJson<HandlerRegistration>,
) -> ApiResult<(StatusCode, axum::Json<RegisteredHandler>)> {
    let (record, secret, warnings) = state.gate().register_handler(&caller, &reg).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(RegisteredHandler {
            handler: HandlerView {
                warnings,
                ..view(&record)?
            },
            secret,
        }),
    ))
}

/// Replace a handler's registration (admins); its secret stays.
#[utoipa::path(
    put, path = "/v1/handlers/{id}", tag = "handlers",
    params(("id" = String, Path, description = "Handler id")),
    request_body = HandlerRegistration,
    responses(
        (status = 200, description = "Replaced", body = HandlerView),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such live handler", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid registration", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn replace_handler(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiPath(id): ApiPath<String>,
    ApiJson(reg): ApiJson<HandlerRegistration>,
) -> ApiResult<axum::Json<HandlerView>> {
    let (record, warnings) = state.gate().replace_handler(&caller, &id, &reg).await?;
    Ok(axum::Json(HandlerView {
        warnings,
        ..view(&record)?
    }))
}

/// `?include_retired=true` also lists retired handlers; `after` and
/// `limit` page the list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HandlerQuery {
    /// Also list retired handlers.
    pub include_retired: Option<bool>,
    /// Only handlers whose id sorts after this one: the last id of the
    /// previous page.
    #[param(min_length = 1, max_length = 200, pattern = r"^[!-~]{1,200}$")]
    pub after: Option<String>,
    /// Page size, 1-500 (default 500). A page shorter than `limit` is the
    /// last, unless it links the next (`Link`: cut short for its size).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
}

/// List handlers by id, a page at a time (admins).
#[utoipa::path(
    get, path = "/v1/handlers", tag = "handlers",
    params(HandlerQuery),
    responses(
        (status = 200, description = "Handlers by id; `Link: <…>; rel=\"next\"` when the page was cut short for its size", body = Vec<HandlerView>),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn list_handlers(
    State(state): State<AppState>,
    Admin(_caller): Admin,
    ApiQuery(q): ApiQuery<HandlerQuery>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Response> {
    let page = ListPage {
        after: q.after,
        limit: q.limit,
        oldest_first: false,
    };
    let (records, cut) = state
        .gate()
        .list_handlers(q.include_retired.unwrap_or(false), page)
        .await?;
    let views = records.iter().map(view).collect::<Result<Vec<_>, _>>()?;
    Ok(after_page(
        "/v1/handlers",
        raw.as_deref(),
        views,
        cut,
        |v| &v.id,
    ))
}

/// Read a handler (admins), retired ones included.
#[utoipa::path(
    get, path = "/v1/handlers/{id}", tag = "handlers",
    params(("id" = String, Path, description = "Handler id")),
    responses(
        (status = 200, description = "The handler", body = HandlerView),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such handler", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn get_handler(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<HandlerView>> {
    Ok(axum::Json(view(
        &state.gate().handler_record(&caller, &id).await?,
    )?))
}

/// Retire a handler (admins): no new actions; its history stays readable.
#[utoipa::path(
    delete, path = "/v1/handlers/{id}", tag = "handlers",
    params(("id" = String, Path, description = "Handler id")),
    responses(
        (status = 200, description = "Retired", body = HandlerView),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such handler", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn retire_handler(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<HandlerView>> {
    let record = state.gate().retire_handler(&caller, &id).await?;
    Ok(axum::Json(view(&record)?))
}

/// A new secret; the previous one stays valid until `previous_valid_until`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RotatedSecret {
    /// The new `whsec_…` secret, shown only now.
    pub secret: String,
    /// Until when the previous secret still signs and verifies.
    pub previous_valid_until: DateTime<Utc>,
}

/// Rotate a handler's secret (admins): both are sent, space-separated, during the grace period.
#[utoipa::path(
    post, path = "/v1/handlers/{id}/rotate-secret", tag = "handlers",
    params(("id" = String, Path, description = "Handler id")),
    responses(
        (status = 200, description = "Rotated", body = RotatedSecret),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such live handler", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn rotate_secret(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<RotatedSecret>> {
    let (secret, until) = state.gate().rotate_handler_secret(&caller, &id).await?;
    Ok(axum::Json(RotatedSecret {
        secret,
        previous_valid_until: until,
    }))
}
