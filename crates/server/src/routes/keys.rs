//! `/v1/keys`: issue, list and revoke API keys (admins).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, post};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use actiongate_gate::{ApiKey, Role};

use crate::auth::Admin;
use crate::error::{ApiJson, ApiPath, ApiResult, Problem};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/keys", post(create_key).get(list_keys))
        .route("/v1/keys/{id}", delete(revoke_key))
}

/// A key to issue.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    /// agent, operator or admin.
    pub role: Role,
    /// The agent the key acts as (required for the agent role): 1-128 of
    /// `A-Z a-z 0-9 _ - . @`.
    #[serde(default)]
    #[schema(
        pattern = r"^[A-Za-z0-9_.@\-]{1,128}$",
        min_length = 1,
        max_length = 128
    )]
    pub agent: Option<String>,
    /// A name to recognise it by: 1-256 characters, no control characters
    /// (it is printed in `actiongate keys list`'s table).
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub name: Option<String>,
}

/// A newly issued key; `key` is shown only in this response.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedKey {
    /// Key id, for revoking.
    pub id: String,
    /// The bearer token. Store it now: it cannot be shown again.
    pub key: String,
    /// Its role.
    pub role: Role,
    /// The agent it acts as.
    pub agent: Option<String>,
    /// Its name.
    pub name: String,
    /// When it was issued.
    pub created_at: DateTime<Utc>,
}

/// Issue a key (admins).
#[utoipa::path(
    post, path = "/v1/keys", tag = "keys",
    request_body = CreateKey,
    responses(
        (status = 201, description = "Issued; the key is shown only now", body = CreatedKey),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn create_key(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiJson(body): ApiJson<CreateKey>,
) -> ApiResult<(StatusCode, axum::Json<CreatedKey>)> {
    let issued = state
        .gate()
        .create_key(&caller, body.role, body.agent, body.name)
        .await?;
    let stored = issued.key;
    Ok((
        StatusCode::CREATED,
        axum::Json(CreatedKey {
            id: stored.id,
            key: issued.secret,
            role: stored.role,
            agent: stored.agent,
            name: stored.name,
            created_at: stored.created_at,
        }),
    ))
}

/// List keys, never their secrets (admins).
#[utoipa::path(
    get, path = "/v1/keys", tag = "keys",
    responses(
        (status = 200, description = "Every key", body = Vec<ApiKey>),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn list_keys(
    State(state): State<AppState>,
    Admin(caller): Admin,
) -> ApiResult<axum::Json<Vec<ApiKey>>> {
    Ok(axum::Json(state.gate().list_keys(&caller).await?))
}

/// Revoke a key (admins); revoking again returns the revoked key.
#[utoipa::path(
    delete, path = "/v1/keys/{id}", tag = "keys",
    params(("id" = String, Path, description = "Key id")),
    responses(
        (status = 200, description = "Revoked", body = ApiKey),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such key", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn revoke_key(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<ApiKey>> {
    Ok(axum::Json(state.gate().revoke_key(&caller, &id).await?))
}
