//! `GET /v1/tools`: every registered action as a tool definition, in the
//! shape OpenAI, Anthropic or MCP clients expect.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::error::{ApiQuery, ApiResult, Problem};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/tools", get(list_tools))
}

/// Tool definition dialects.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolFormat {
    /// OpenAI function calling: `{type: "function", function: {name, description, parameters}}`.
    #[default]
    Openai,
    /// Anthropic: `{name, description, input_schema}`.
    Anthropic,
    /// MCP `tools/list` entries: `{name, description, inputSchema, annotations}`.
    Mcp,
}

/// `?format=openai|anthropic|mcp`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ToolsQuery {
    /// Dialect (default openai).
    #[param(inline)]
    pub format: Option<ToolFormat>,
}

pub use actiongate_gate::tools::tool_name;

/// Tool definitions of every registered action (`{tools: [...]}`).
#[utoipa::path(
    get, path = "/v1/tools", tag = "handlers",
    params(ToolsQuery),
    responses(
        (status = 200, description = "`{tools: [...]}` in the requested dialect", body = Object),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Unknown format", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn list_tools(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ToolsQuery>,
) -> ApiResult<axum::Json<Value>> {
    let format = q.format.unwrap_or_default();
    let tools: Vec<Value> = state
        .gate()
        .handler_tools(&caller)
        .await?
        .iter()
        .map(|t| {
            let annotations = crate::mcp::tools::annotations_json(t);
            let (name, description, schema) = (&t.name, &t.description, &t.params_schema);
            match format {
                ToolFormat::Openai => json!({
                    "type": "function",
                    "function": {"name": name, "description": description, "parameters": schema}
                }),
                ToolFormat::Anthropic => {
                    json!({"name": name, "description": description, "input_schema": schema})
                }
                ToolFormat::Mcp => {
                    json!({"name": name, "description": description, "inputSchema": schema,
                        "annotations": annotations})
                }
            }
        })
        .collect();
    Ok(axum::Json(json!({"tools": tools})))
}
