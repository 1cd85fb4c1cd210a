//! The OpenAPI 3.1 document, generated from the handlers' annotations. The
//! committed `openapi/openapi.json` must equal [`document_json`]; a test
//! fails when they drift (`actiongate openapi > openapi/openapi.json`).

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::routes::{
    actions, agents, audit, check, events, grant_requests, grants, handlers, keys, ops, presets,
    results, subscriptions, tools,
};

/// The API description.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "actiongate",
        description = "Gates what AI agents do: agents request actions, a policy answers allow, ask or deny, humans decide what is asked.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    paths(
        actions::create_action, actions::list_actions, actions::get_action,
        actions::approve, actions::deny, actions::reply, actions::cancel, actions::outcome,
        check::check,
        results::post_result,
        handlers::rotate_secret,
        handlers::create_handler, handlers::list_handlers, handlers::get_handler,
        handlers::replace_handler, handlers::retire_handler,
        tools::list_tools,
        grants::create_grant, grants::list_grants, grants::get_grant, grants::revoke_grant,
        grants::check_permission,
        grant_requests::create_request, grant_requests::list_requests, grant_requests::get_request,
        grant_requests::approve_request, grant_requests::deny_request,
        agents::put_agent, agents::get_agent, agents::list_agents,
        keys::create_key, keys::list_keys, keys::revoke_key,
        presets::list_presets,
        ops::healthz, ops::readyz, ops::metrics_text, ops::openapi,
        events::stream_events, events::action_events,
        subscriptions::create_subscription, subscriptions::list_subscriptions,
        subscriptions::get_subscription, subscriptions::delete_subscription,
        subscriptions::list_deliveries,
        audit::audit_export,
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "actions", description = "Requesting and deciding actions"),
        (name = "agents", description = "Agents and their permission profiles"),
        (name = "keys", description = "API keys"),
        (name = "handlers", description = "Executors, the actions they perform, tool schemas"),
        (name = "grants", description = "Standing permissions granted by humans, and requests for them"),
        (name = "operations", description = "Health, readiness, metrics"),
        (name = "events", description = "Event streams (Server-Sent Events)"),
        (name = "subscriptions", description = "Outbound notification webhooks"),
        (name = "audit", description = "Tamper-evident export of the event log"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The document as pretty JSON with a trailing newline.
pub fn document_json() -> String {
    let mut text = ApiDoc::openapi()
        .to_pretty_json()
        .unwrap_or_else(|_| "{}".to_owned());
    text.push('\n');
    text
}
