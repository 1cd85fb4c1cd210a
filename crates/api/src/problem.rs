//! The RFC 9457 problem body of every error answer.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One invalid field of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FieldError {
    /// Where: a body field path (`timeout`, `profile.allow[2]`) or query parameter.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// The RFC 9457 body of every error response.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Problem {
    /// Stable identifier of the kind of problem, `urn:actiongate:problem:<code>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Short summary of the kind of problem.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong this time.
    pub detail: String,
    /// The machine-readable code alone, one of: `bad-request` (400),
    /// `unauthorized` (401), `forbidden` (403), `not-found` (404),
    /// `method-not-allowed` (405), `conflict` (409), `action-settled` (409),
    /// `grant-request-settled` (409), `too-large` (413),
    /// `unsupported-media-type` (415), `validation` (422), `limit-reached`
    /// (429), `internal` (500), `unavailable` and `database-busy` (503, with
    /// `Retry-After`),
    /// `storage-full` (507).
    #[schema(example = "validation")]
    pub code: String,
    /// Invalid fields, for validation errors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    /// The current status of the action, for conflicts over its state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_status: Option<String>,
}
