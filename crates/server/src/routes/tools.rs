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
    /// MCP `tools/list` entries: `{name, description, inputSchema}`.
    Mcp,
}

/// `?format=openai|anthropic|mcp`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ToolsQuery {
    /// Dialect (default openai).
    pub format: Option<ToolFormat>,
}

/// The tool name of a handler action: `<handler>__<action>`, with characters
/// outside `[A-Za-z0-9_-]` replaced so every dialect accepts it.
pub fn tool_name(handler: &str, action: &str) -> String {
    format!("{handler}__{action}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

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
    _caller: Caller,
    ApiQuery(q): ApiQuery<ToolsQuery>,
) -> ApiResult<axum::Json<Value>> {
    let format = q.format.unwrap_or_default();
    let mut tools = Vec::new();
    for record in state.gate().list_handlers(false).await? {
        let handler = state.gate().handler(&record.id).await?;
        for a in &handler.actions {
            let name = tool_name(&record.id, &a.decl.name);
            let description = a
                .decl
                .description
                .clone()
                .unwrap_or_else(|| format!("{} ({})", a.decl.name, record.name));
            let schema = a.decl.params_schema.clone();
            tools.push(match format {
                ToolFormat::Openai => json!({
                    "type": "function",
                    "function": {"name": name, "description": description, "parameters": schema}
                }),
                ToolFormat::Anthropic => {
                    json!({"name": name, "description": description, "input_schema": schema})
                }
                ToolFormat::Mcp => {
                    json!({"name": name, "description": description, "inputSchema": schema})
                }
            });
        }
    }
    Ok(axum::Json(json!({"tools": tools})))
}
