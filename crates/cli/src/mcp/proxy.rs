//! The proxy's MCP server (on stdio, toward the agent) and its client of
//! the upstream server. `tools/list` is relayed with unaccepted definitions
//! hidden; each `tools/call` is first requested as the action
//! `tool:mcp__NAME__<tool>:<arguments as compact JSON>` through the HTTP
//! API: allowed, it is forwarded; asked, the call waits (sending progress
//! when the client asked for it); anything else is an error result with
//! the reason. Nothing that fails is forwarded.
//!
//! Resources and prompts are relayed too: their lists as they are, and
//! each read or use gated the same way, as `tool:mcp-resource:NAME <uri>`
//! and `tool:mcp-prompt:NAME <prompt> <arguments as compact JSON>` (a
//! resource can hold what a tool would be refused). Progress of a forwarded
//! call and the upstream's list changes reach the agent, coalesced
//! ([`super::coalesce`]). Not relayed: completions, logging, resource
//! subscriptions, and requests the upstream server makes of the client
//! (elicitation, sampling, roots), which the proxy answers itself, a few
//! at a time ([`super::requests`]).

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequest, CancelledNotificationParam, ClientRequest, GetExtensions, ServerResult,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ReadResourceRequestParams, ReadResourceResponse, ResultType, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::PeerRequestOptions;
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleClient, RoleServer};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::pins::PinFile;
use super::progress::{ProgressTokens, Relay, RelayTo};
use super::upstream::Downstream;
use crate::hooks::Fallback;
use crate::hooks::gate::{Verdict, answer_for};
use crate::hooks::map::sanitize_tool;
use crate::http::{Api, ClientError, is_settled};

/// The proxy's server.
#[derive(Clone)]
pub struct Proxy {
    /// The server's name (`mcp__NAME__tool`).
    pub name: String,
    /// The daemon.
    pub api: Arc<Api>,
    /// The upstream server.
    pub upstream: Peer<RoleClient>,
    /// The tool pins.
    pub pins: Arc<Mutex<PinFile>>,
    /// The agent's side (see [`Downstream`]).
    pub downstream: Downstream,
    /// Progress interval while a call waits for a human.
    pub progress_every: Duration,
    /// Tokens of forwarded calls (see [`Upstream::on_progress`]).
    pub progress: ProgressTokens,
    /// Longest the upstream may take to answer anything the proxy asks
    /// it (a forwarded call, a listing, a read).
    pub upstream_timeout: Duration,
    /// The upstream's instructions to the agent, when an operator
    /// accepted them ([`Proxy::accepted_instructions`]).
    pub instructions: Option<String>,
    /// The session every gated action belongs to: what the upstream
    /// answers is untrusted input, so an allowed call taints it
    /// (`docs/sessions.md`), and a way out after it is asked.
    pub session: String,
}

fn error_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// The error result of a forwarded call the upstream server did not answer
/// as it should.
fn upstream_failed(e: rmcp::ServiceError) -> CallToolResult {
    let why = match e {
        rmcp::ServiceError::McpError(e) => e.message.to_string(),
        rmcp::ServiceError::Timeout { timeout } => format!(
            "no answer within {} s (--upstream-timeout)",
            timeout.as_secs()
        ),
        other => other.to_string(),
    };
    error_result(format!("the upstream server failed: {why}"))
}

fn internal(e: impl std::fmt::Display) -> rmcp::ErrorData {
    rmcp::ErrorData::internal_error(e.to_string(), None)
}

/// Why a listing (or a read before anything was gated) failed, in the
/// proxy's words only: the upstream's own error text would reach the agent
/// as a result no action covered, and so taint nothing (a stranger's
/// instructions in an error message).
fn unlisted(e: &rmcp::ServiceError) -> String {
    match e {
        rmcp::ServiceError::Timeout { timeout } => format!(
            "the upstream server did not answer within {} s (--upstream-timeout)",
            timeout.as_secs()
        ),
        rmcp::ServiceError::McpError(e) => format!(
            "the upstream server answered with error {} (its text is not passed on)",
            e.code.0
        ),
        _ => "the upstream server could not be reached".to_owned(),
    }
}

/// [`unlisted`] as the error of a request the proxy answers itself.
fn upstream_error(e: rmcp::ServiceError) -> rmcp::ErrorData {
    rmcp::ErrorData::internal_error(unlisted(&e), None)
}

/// What the proxy answers when the upstream asks the client for input
/// (sampling, elicitation, roots) to finish a read or a prompt: it relays
/// no such request, so the user's and the model's answers never reach it.
fn input_required() -> rmcp::ErrorData {
    rmcp::ErrorData::internal_error(
        "the upstream server asked the client for input (sampling, elicitation or roots), \
         which the proxy does not relay",
        None,
    )
}

impl Proxy {
    fn remember_peer(&self, peer: &Peer<RoleServer>) {
        if let Ok(mut p) = self.downstream.lock()
            && p.is_none()
        {
            *p = Some(peer.clone());
        }
    }

    /// Requests a tool call as the action of `tool` (`mcp__NAME__<tool>`)
    /// and waits for it to settle.
    async fn gate(
        &self,
        tool: &str,
        args: &Value,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Value, ClientError> {
        self.gate_action(tool, args.to_string(), ctx).await
    }

    /// Gates a resource read or a prompt (`tool` is `mcp-resource` or
    /// `mcp-prompt`): `Ok` only when the action was allowed.
    async fn gate_use(
        &self,
        tool: &str,
        what: String,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), rmcp::ErrorData> {
        let detail = format!("{} {what}", self.name);
        let refused = |m: String| rmcp::ErrorData::invalid_request(m, None);
        let action = self
            .gate_action(tool, detail, ctx)
            .await
            .map_err(|e| refused(format!("actiongate: {e}")))?;
        let decision = answer_for(&action, Fallback::Deny, 0);
        if decision.verdict == Verdict::Allow {
            Ok(())
        } else {
            Err(refused(decision.reason))
        }
    }

    /// Requests the decision-only action `tool:<tool>:<detail>` and waits
    /// for it to settle, with progress for the client.
    async fn gate_action(
        &self,
        tool: &str,
        detail: String,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Value, ClientError> {
        let body = json!({
            "tool": tool,
            "detail": detail,
            "session": self.session,
            "reason": format!("MCP server '{}' (actiongate mcp proxy)", self.name),
        });
        let (mut action, _) = self.api.create_action(&body, Duration::ZERO).await?;
        let token = ctx.meta.get_progress_token();
        let mut step = 0u32;
        while !is_settled(&action) {
            let id = action
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            tokio::select! {
                // `wait_settled` does not long-poll for less than a second.
                next = self.api.wait_settled(action.clone(), self.progress_every + Duration::from_secs(1)) => action = next?,
                () = ctx.ct.cancelled() => {
                    let _ = self.api.cancel(&id).await;
                    return Err(ClientError::BadResponse("the call was cancelled; the request was withdrawn".to_owned()));
                }
            }
            if !is_settled(&action)
                && let Some(token) = token.clone()
            {
                step += 1;
                let param = ProgressNotificationParam::new(token, f64::from(step))
                    .with_message(format!("waiting for an operator (action {id})"));
                let _ = ctx.peer.notify_progress(param).await;
            }
        }
        Ok(action)
    }
}

impl Proxy {
    /// Sends an allowed call upstream and relays its progress to the agent
    /// (when the agent asked for progress). The agent cancelling cancels
    /// the forwarded call. Whatever goes wrong upstream (no answer in time,
    /// an answer too large, too deep or malformed, the server gone) is an
    /// error result: the agent's call is always answered.
    async fn forward(
        &self,
        call: CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        let mut request = ClientRequest::CallToolRequest(CallToolRequest::new(call));
        // The relay is recorded as the request is written, before any
        // progress for it can be read (see `super::progress`).
        let relay = ctx.meta.get_progress_token().map(Relay::new);
        if let Some(r) = &relay {
            request.extensions_mut().insert(RelayTo(r.clone()));
        }
        let handle = match self
            .upstream
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(h) => h,
            Err(e) => return Ok(upstream_failed(e).into()),
        };
        let (id, ours) = (handle.id.clone(), handle.progress_token.clone());
        let answer = tokio::select! {
            r = handle.await_response() => Some(r),
            () = ctx.ct.cancelled() => None,
            () = tokio::time::sleep(self.upstream_timeout) => Some(Err(rmcp::ServiceError::Timeout {
                timeout: self.upstream_timeout,
            })),
        };
        // Progress the upstream sent before its result goes to the agent
        // before the result does (see `super::progress`); a call the agent
        // cancelled has none to wait for.
        if let Ok(mut m) = self.progress.lock() {
            m.remove(&ours);
        }
        if let Some(relay) = relay.filter(|_| answer.is_some()) {
            relay.passed_on().await;
        }
        let answer = match answer {
            Some(Ok(a)) => a,
            Some(Err(e)) => {
                if matches!(e, rmcp::ServiceError::Timeout { .. }) {
                    self.cancel_upstream(id, "the proxy's upstream timeout passed");
                }
                return Ok(upstream_failed(e).into());
            }
            None => {
                self.cancel_upstream(id, "the agent cancelled the call");
                return Ok(error_result("the call was cancelled").into());
            }
        };
        match answer {
            ServerResult::CallToolResult(r) => Ok(CallToolResponse::Complete(r)),
            other => Ok(error_result(format!(
                "the upstream server failed: it answered with a result the proxy does not relay: {}",
                serde_json::to_string(&other).unwrap_or_default()
            ))
            .into()),
        }
    }
}

impl Proxy {
    /// Tells the upstream that forwarded call `id` is cancelled, on the
    /// side and within `--upstream-timeout`: an upstream that no longer
    /// reads its input (its pipe full) would hold the write, and with it
    /// the agent's answer, for ever.
    fn cancel_upstream(&self, id: rmcp::model::RequestId, why: &str) {
        let note = CancelledNotificationParam::new(Some(id), Some(why.to_owned()));
        let (upstream, wait) = (self.upstream.clone(), self.upstream_timeout);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(wait, upstream.notify_cancelled(note)).await;
        });
    }

    /// `request` to the upstream, answered within `--upstream-timeout`.
    async fn within<T>(
        &self,
        request: impl std::future::Future<Output = Result<T, rmcp::ServiceError>>,
    ) -> Result<T, rmcp::ServiceError> {
        tokio::time::timeout(self.upstream_timeout, request)
            .await
            .unwrap_or(Err(rmcp::ServiceError::Timeout {
                timeout: self.upstream_timeout,
            }))
    }

    /// The upstream's tools, every page of them, within
    /// `--upstream-timeout` and at most [`MAX_TOOL_PAGES`] pages,
    /// [`MAX_TOOLS`] tools and [`MAX_LISTING_BYTES`] of definitions: an
    /// upstream that lists without end, or stops answering, fails the
    /// listing rather than hold every call (each is checked against the
    /// list) and grow the proxy's memory. The error is in the proxy's own
    /// words ([`unlisted`]).
    pub(super) async fn upstream_tools(&self) -> Result<Vec<Tool>, String> {
        let pages = async {
            let mut tools = Vec::new();
            let mut bytes = 0;
            let mut params = None;
            for _ in 0..MAX_TOOL_PAGES {
                let page = self
                    .upstream
                    .list_tools(params)
                    .await
                    .map_err(|e| unlisted(&e))?;
                bytes += page
                    .tools
                    .iter()
                    .map(|t| serde_json::to_vec(t).map_or(0, |v| v.len()))
                    .sum::<usize>();
                tools.extend(page.tools);
                if tools.len() > MAX_TOOLS {
                    return Err(too_many(&format!("more than {MAX_TOOLS} tools")));
                }
                if bytes > MAX_LISTING_BYTES {
                    return Err(too_many(&format!(
                        "more than {} MiB of tool definitions",
                        MAX_LISTING_BYTES >> 20
                    )));
                }
                match page.next_cursor {
                    Some(c) => {
                        params = Some(PaginatedRequestParams::default().with_cursor(Some(c)))
                    }
                    None => return Ok(tools),
                }
            }
            Err(too_many(&format!(
                "more than {MAX_TOOL_PAGES} pages of tools"
            )))
        };
        match tokio::time::timeout(self.upstream_timeout, pages).await {
            Ok(listed) => listed,
            Err(_) => Err(unlisted(&rmcp::ServiceError::Timeout {
                timeout: self.upstream_timeout,
            })),
        }
    }
}

/// Most pages of tools one listing reads.
const MAX_TOOL_PAGES: usize = 100;
/// Most tools one listing keeps.
const MAX_TOOLS: usize = 10_000;
/// Most bytes of tool definitions one listing keeps (each page is bounded
/// by `--max-message-bytes` already; this bounds them together).
const MAX_LISTING_BYTES: usize = 16 << 20;

/// The error of a listing cut off at a bound.
fn too_many(what: &str) -> String {
    format!("the upstream server listed {what}: the proxy stops there")
}

impl ServerHandler for Proxy {
    fn get_info(&self) -> ServerConfig {
        let upstream = self.upstream.peer_info();
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        // Resources and prompts as the upstream offers them, but no
        // resource subscriptions: they are not relayed.
        if let Some(up) = upstream.as_ref().map(|u| &u.capabilities) {
            capabilities.resources = up.resources.clone().map(|mut r| {
                r.subscribe = None;
                r
            });
            capabilities.prompts = up.prompts.clone();
        }
        let mut info = ServerConfig::new(capabilities).with_server_info(Implementation::new(
            format!("actiongate-proxy-{}", self.name),
            env!("CARGO_PKG_VERSION"),
        ));
        // The upstream's instructions, when accepted (`pin_questions`).
        if let Some(i) = self.instructions.clone() {
            info = info.with_instructions(i);
        }
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, rmcp::ErrorData> {
        self.remember_peer(&ctx.peer);
        let tools = self.upstream_tools().await.map_err(internal)?;
        let visible = self.accepted(tools).await.map_err(internal)?;
        Ok(ListToolsResult::with_all_items(visible))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        self.remember_peer(&ctx.peer);
        let name = request.name.to_string();
        let tools = match self.upstream_tools().await {
            Ok(t) => t,
            Err(why) => return Ok(error_result(why).into()),
        };
        let visible = match self.accepted(tools).await {
            Ok(v) => v,
            Err(e) => return Ok(error_result(format!("actiongate: {e}")).into()),
        };
        let Some(judged) = visible
            .iter()
            .find(|t| t.name == name)
            .map(super::pins::digest)
        else {
            return Ok(error_result(format!(
                "tool '{name}' is unknown, or its definition is new or changed and waits for an \
                 operator to accept it"
            ))
            .into());
        };
        // The action's tool must be the name as it is: a rewritten one
        // (white space or `:` made `_`, cut at 128) could be another
        // tool's, and the call would be judged by that tool's rules.
        let tool = format!("mcp__{}__{name}", self.name);
        if sanitize_tool(&tool) != tool {
            return Ok(error_result(format!(
                "tool '{name}' cannot be gated: as the action's tool, '{tool}' must be 1-128 \
                 characters of A-Z a-z 0-9 _ - . (not forwarded)"
            ))
            .into());
        }
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let action = match self.gate(&tool, &args, &ctx).await {
            Ok(a) => a,
            Err(e) => return Ok(error_result(format!("actiongate: {e}")).into()),
        };
        let decision = answer_for(&action, Fallback::Deny, 0);
        if decision.verdict != Verdict::Allow {
            return Ok(error_result(decision.reason).into());
        }
        // A human decided while the upstream could change the definition.
        if decision.by_operator && self.accepted_digest(&name).await != Ok(Some(judged)) {
            return Ok(error_result(format!(
                "tool '{name}' changed its definition while a human decided the call (not \
                 forwarded): call it again once the new definition is accepted"
            ))
            .into());
        }
        // Only what the operator saw goes on: a client's answers to an
        // earlier input request, or a state token, could carry other
        // arguments to an upstream that reads them.
        let mut forwarded = request;
        forwarded.meta = None;
        forwarded.input_responses = None;
        forwarded.request_state = None;
        let mut response = self.forward(forwarded, &ctx).await?;
        // An upstream of the handshake era sends no `resultType`; a client
        // of the stateless era needs it (rmcp leaves it out again for
        // clients of the handshake era). The same goes for every relayed
        // result below.
        if let CallToolResponse::Complete(r) = &mut response
            && r.result_type.is_none()
        {
            r.result_type = Some(ResultType::COMPLETE);
        }
        Ok(response)
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        self.remember_peer(&ctx.peer);
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, rmcp::ErrorData> {
        self.remember_peer(&ctx.peer);
        let r = self.upstream.list_resources(request.map(without_meta));
        let mut r = self.within(r).await.map_err(upstream_error)?;
        r.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(r)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, rmcp::ErrorData> {
        self.remember_peer(&ctx.peer);
        let r = self
            .upstream
            .list_resource_templates(request.map(without_meta));
        let mut r = self.within(r).await.map_err(upstream_error)?;
        r.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(r)
    }

    async fn read_resource(
        &self,
        mut request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, rmcp::ErrorData> {
        self.remember_peer(&ctx.peer);
        // The action's detail is "NAME <uri>": a URI with white space (never
        // a valid one) could make a rule read as meant for another.
        refuse_blank(&request.uri, "resource URI")?;
        self.gate_use(RESOURCE_TOOL, request.uri.clone(), &ctx)
            .await?;
        request.meta = None;
        request.input_responses = None;
        request.request_state = None;
        let r = self.upstream.read_resource_once(request);
        match self.within(r).await.map_err(upstream_error)? {
            ReadResourceResponse::Complete(mut c) => {
                c.result_type.get_or_insert(ResultType::COMPLETE);
                Ok(ReadResourceResponse::Complete(c))
            }
            _ => Err(input_required()),
        }
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, rmcp::ErrorData> {
        self.remember_peer(&ctx.peer);
        let r = self.upstream.list_prompts(request.map(without_meta));
        let mut r = self.within(r).await.map_err(upstream_error)?;
        r.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(r)
    }

    async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, rmcp::ErrorData> {
        self.remember_peer(&ctx.peer);
        refuse_blank(&request.name, "prompt name")?;
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        self.gate_use(PROMPT_TOOL, format!("{} {args}", request.name), &ctx)
            .await?;
        request.meta = None;
        request.input_responses = None;
        request.request_state = None;
        let r = self.upstream.get_prompt_once(request);
        match self.within(r).await.map_err(upstream_error)? {
            GetPromptResponse::Complete(mut c) => {
                c.result_type.get_or_insert(ResultType::COMPLETE);
                Ok(GetPromptResponse::Complete(c))
            }
            _ => Err(input_required()),
        }
    }
}

/// The action tool a resource read is gated as.
pub const RESOURCE_TOOL: &str = "mcp-resource";
/// The action tool a prompt is gated as.
pub const PROMPT_TOOL: &str = "mcp-prompt";

/// Refuses an empty `what`, or one with white space or control characters,
/// which the gated action's detail could not tell apart.
fn refuse_blank(what: &str, name: &str) -> Result<(), rmcp::ErrorData> {
    if what.is_empty() || what.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(rmcp::ErrorData::invalid_params(
            format!("actiongate: a {name} must be non-empty, without spaces or control characters"),
            None,
        ));
    }
    Ok(())
}

fn without_meta(mut p: PaginatedRequestParams) -> PaginatedRequestParams {
    p.meta = None;
    p
}
