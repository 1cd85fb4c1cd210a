//! Signed decision receipts: `GET /v1/actions/{id}/receipt` and the public
//! key at `GET /.well-known/actiongate-receipt-key` (a JWK, no key needed:
//! whoever checks a receipt needs only this).

use actiongate_api::receipts::ActionReceipt;
use axum::Router;
use axum::extract::State;
use axum::routing::get;

use crate::auth::Caller;
use crate::error::{ApiPath, ApiResult, Problem};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/actions/{id}/receipt", get(action_receipt))
        .route("/.well-known/actiongate-receipt-key", get(receipt_key))
}

/// The signed receipt of an action's settled decision.
#[utoipa::path(
    get, path = "/v1/actions/{id}/receipt", tag = "actions",
    params(("id" = String, Path, description = "Action id (a UUID)")),
    responses(
        (status = 200, description = "The receipt and what it states", body = ActionReceipt),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such action visible to the caller", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The action is pending: no decision to sign yet", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn action_receipt(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<ActionReceipt>> {
    Ok(axum::Json(state.gate().action_receipt(&caller, &id).await?))
}

/// The public key that checks receipts, as a JWK (`kty` `OKP`, `crv`
/// `Ed25519`, `kid`). No key needed.
#[utoipa::path(
    get, path = "/.well-known/actiongate-receipt-key", tag = "actions",
    responses(
        (status = 200, description = "The receipt key (JWK)", body = Object),
    ),
)]
pub async fn receipt_key(
    State(state): State<AppState>,
) -> ApiResult<axum::Json<serde_json::Value>> {
    Ok(axum::Json(state.gate().receipt_key().await?))
}
