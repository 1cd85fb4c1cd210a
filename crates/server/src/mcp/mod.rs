//! `/mcp`: the Model Context Protocol over Streamable HTTP, on rmcp's tower
//! service. Requests of the stateless revision (`2026-07-28`) are served
//! without a session, so any daemon on the same database answers them; the
//! handshake era (`2025-11-25`, `2025-06-18`, ...) gets rmcp's in-memory
//! sessions. Every request carries an agent key as Bearer token, checked by
//! the gate before rmcp sees the request (401 problem+json without one).
//! The tools themselves are in [`tools`] and [`call`]; waiting for a human
//! with progress notifications in [`wait`].

pub mod call;
pub mod dropped;
mod held;
pub mod plans;
pub mod sessions;
pub mod tasks;
pub mod tools;
pub mod wait;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{FromRequestParts, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::ServerHandler;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams,
    GetTaskResult, Implementation, InitializeRequestParams, InitializeResult, ListToolsResult,
    MetaObject, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    ServerNotification, SubscriptionFilter, TASKS_EXTENSION_ID, Tool, ToolListChangedNotification,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use actiongate_gate::Caller;

use crate::state::AppState;

/// The `/mcp` route, authenticated, for the daemon's router.
pub fn router(state: &AppState) -> Router<AppState> {
    let for_factory = state.clone();
    let config = StreamableHttpServerConfig::default()
        // The Bearer key is the protection here; a daemon behind a proxy or
        // a load balancer is reached under names of its operator's choosing.
        .disable_allowed_hosts()
        // A browser page may send the key it was given to no origin but
        // those configured: any other `Origin` gets 403 (none by default);
        // requests without one (SDKs, Claude Code) are not concerned.
        .with_allowed_origins(state.settings().http.mcp_allowed_origins.clone())
        .enforce_origin_validation()
        .with_max_request_body_bytes(state.settings().http.body_limit_bytes)
        .with_cancellation_token(state.gate().shutdown().child_token());
    let sessions = Arc::new(LocalSessionManager::default());
    let owners = sessions::SessionOwners::new(
        sessions.clone(),
        state.gate().idle_timeout().to_std().unwrap_or_default(),
    );
    let orphans = dropped::Orphans::new(
        sessions.clone(),
        Duration::from_secs(state.settings().http.mcp_resume_seconds),
        state.settings().http.body_limit_bytes,
    );
    let service = StreamableHttpService::new(
        move || Ok(McpServer::new(for_factory.clone())),
        sessions,
        config,
    );
    // Layers run outside in: the key first, then every refusal made a
    // problem, then the session's owner, then the watch on calls whose
    // client goes away.
    Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            orphans,
            dropped::watch,
        ))
        .layer(axum::middleware::from_fn_with_state(owners, sessions::bind))
        .layer(axum::middleware::from_fn(problem_bodies))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authenticate,
        ))
}

/// Authenticates the Bearer key (any role: the tools check what they need)
/// and hands the [`Caller`] to the tools through the request's extensions.
/// The request holds a place among its key's open streams and long-polls
/// (see [`held`]): 429 when the key holds them all.
async fn authenticate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    match Caller::from_request_parts(&mut parts, &state).await {
        Ok(caller) => {
            let guard = match state.gate().key_guard(&caller) {
                Ok(guard) => guard,
                Err(e) => return crate::error::ApiError::from(e).into_response(),
            };
            parts.extensions.insert(caller);
            held::until_done(next.run(Request::from_parts(parts, body)).await, guard)
        }
        Err(e) => e.into_response(),
    }
}

/// rmcp refuses some requests itself (a browser `Origin`, a method or a
/// media type it does not serve) with a plain-text body: they are answered
/// as problem+json, like every other refusal of the daemon. JSON bodies
/// (JSON-RPC errors) pass unchanged. rmcp answers a body it cannot read
/// as one JSON-RPC message (not JSON, nested past its parser's depth, or
/// a batch, which MCP no longer has) 415 even when it was sent as JSON:
/// that is a bad body, see [`unreadable_message`].
async fn problem_bodies(request: Request, next: Next) -> Response {
    let sent_json = crate::error::has_json_content_type(request.headers());
    let resp = next.run(request).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.contains("json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    // rmcp's refusals are a line of text; a longer body is cut.
    let text = axum::body::to_bytes(resp.into_body(), 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let detail = if text.is_empty() {
        status.canonical_reason().unwrap_or("refused").to_owned()
    } else {
        text
    };
    if status == axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE && sent_json {
        return unreadable_message(&detail).into_response();
    }
    crate::error::ApiError::refusal(status, detail).into_response()
}

/// A JSON body rmcp could not read as one JSON-RPC message, answered as
/// every other endpoint answers a bad body: JSON of another shape (a
/// batch, nesting past the parser's depth) is 422 naming the body, text
/// that is not JSON 400.
fn unreadable_message(detail: &str) -> crate::error::ApiError {
    let detail = detail
        .strip_prefix("fail to deserialize request body")
        .unwrap_or(detail)
        .trim();
    let shape = [
        "unrecognized JSON-RPC message",
        "did not match any variant",
        "recursion limit",
    ];
    if shape.iter().any(|s| detail.contains(s)) {
        crate::error::ApiError::invalid(
            "body",
            format!(
                "not one JSON-RPC request, notification or response (MCP has no batches; \
                 nesting is limited): {detail}"
            ),
        )
    } else {
        crate::error::ApiError::bad_request(format!("the body is not valid JSON: {detail}"))
    }
}

/// One MCP server: per session in the handshake era, per request in the
/// stateless one. It holds nothing but the shared state.
#[derive(Clone)]
pub struct McpServer {
    state: AppState,
}

impl McpServer {
    /// A server over `state`.
    pub fn new(state: AppState) -> McpServer {
        McpServer { state }
    }

    fn progress_every(&self) -> Duration {
        Duration::from_secs(self.state.settings().http.mcp_progress_seconds)
    }
}

/// Whether the request of `ctx` speaks the stateless revision (2026-07-28
/// or later).
fn is_stateless(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The `_meta` key naming the server in every result of the stateless era
/// (2026-07-28, a SHOULD; rmcp sets it on `server/discover` itself).
const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// This server as results name it.
fn implementation() -> Implementation {
    Implementation::new("actiongate", env!("CARGO_PKG_VERSION"))
}

/// Names the server in `meta` when the request of `ctx` is of the
/// stateless era (the handshake era named it once, in `initialize`).
fn name_server(meta: &mut Option<MetaObject>, ctx: &RequestContext<RoleServer>) {
    if !is_stateless(ctx) {
        return;
    }
    if let Ok(info) = serde_json::to_value(implementation()) {
        meta.get_or_insert_with(|| MetaObject(Default::default()))
            .insert(SERVER_INFO.to_owned(), info);
    }
}

/// The caller authenticated for the request of `ctx`.
fn caller_of(ctx: &RequestContext<RoleServer>) -> Result<Caller, rmcp::ErrorData> {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .ok_or_else(|| rmcp::ErrorData::internal_error("the request was not authenticated", None))
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_tasks()
                .build(),
        )
        .with_server_info(implementation())
        .with_instructions(
            "actiongate gates what you do: ask for a permission with request_permission, \
             check or request an action, or call a gated tool. A call may wait for a human; \
             its answer says whether it was allowed.",
        )
    }

    /// The handshake era: as `get_info` says, but without the tasks
    /// extension, which is served only to the stateless era (SEP-2663
    /// defines it for no older version).
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, rmcp::ErrorData> {
        ctx.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        if let Some(extensions) = result.capabilities.extensions.as_mut() {
            extensions.remove(TASKS_EXTENSION_ID);
            if extensions.is_empty() {
                result.capabilities.extensions = None;
            }
        }
        Ok(result)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, rmcp::ErrorData> {
        let caller = caller_of(&ctx)?;
        let mut list: Vec<Tool> = tools::builtin();
        let handler_tools = self
            .state
            .gate()
            .handler_tools(&caller)
            .await
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))?;
        list.extend(handler_tools.iter().map(tools::of_handler));
        let mut result = ListToolsResult::with_all_items(list);
        name_server(&mut result.meta, &ctx);
        if is_stateless(&ctx) {
            // The list follows handler changes: a client may reuse it this
            // long, then asks again (any daemon answers from the database).
            // Private: it is listed for an authenticated caller.
            result = result
                .with_ttl_ms(self.state.settings().http.mcp_tools_ttl_seconds * 1000)
                .with_cache_scope(CacheScope::Private);
        }
        Ok(result)
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // `subscriptions/listen` (stateless era): only the tool list changes
        // (rmcp keeps of this what the client asked for).
        let _ = requested;
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), rmcp::ErrorData> {
        let gate = self.state.gate();
        let mut changes = gate.handlers_changed();
        changes.mark_unchanged();
        let shutdown = gate.shutdown().clone();
        loop {
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let note = ServerNotification::ToolListChangedNotification(
                        ToolListChangedNotification::default(),
                    );
                    if subscription.sink().send(note).await.is_err() {
                        return Ok(());
                    }
                }
                () = subscription.cancelled() => return Ok(()),
                // A graceful end: the client listens again elsewhere.
                () = shutdown.cancelled() => return Ok(()),
            }
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        let caller = caller_of(&ctx)?;
        // Tasks are the stateless era's (SEP-2663 defines the extension for
        // no older version), for a client that says it takes them.
        let tasks = is_stateless(&ctx)
            && ctx
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks());
        let waiter = wait::Waiter::new(&ctx, self.progress_every());
        let trail = ctx
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<sessions::ConnectionTrail>())
            .cloned();
        let mut response = call::call(
            &self.state,
            &caller,
            request,
            call::Meta {
                meta: &ctx.meta,
                trail,
            },
            waiter,
            tasks,
        )
        .await;
        match &mut response {
            CallToolResponse::Complete(r) => name_server(&mut r.meta, &ctx),
            CallToolResponse::Task(t) => name_server(&mut t.meta, &ctx),
            CallToolResponse::InputRequired(r) => name_server(&mut r.meta, &ctx),
            _ => {}
        }
        Ok(response)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, rmcp::ErrorData> {
        let caller = caller_of(&ctx)?;
        let mut result = tasks::get(self.state.gate(), &caller, &request.task_id).await?;
        name_server(&mut result.meta, &ctx);
        Ok(result)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), rmcp::ErrorData> {
        let caller = caller_of(&ctx)?;
        tasks::cancel(self.state.gate(), &caller, &request.task_id).await
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        tools::follow_handler_changes(self.state.gate().clone(), ctx.peer);
    }
}
