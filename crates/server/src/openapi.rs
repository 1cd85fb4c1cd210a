//! The OpenAPI 3.1 document, generated from the handlers' annotations. The
//! committed `openapi/openapi.json` must equal [`document_json`]; a test
//! fails when they drift (`actiongate openapi > openapi/openapi.json`).

use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use crate::routes::{
    actions, agents, audit, check, events, grant_requests, grants, handlers, keys, ops, people,
    presets, receipts, replay, results, sessions, subscriptions, tools, whoami,
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
        receipts::action_receipt, receipts::receipt_key, replay::replay,
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
        keys::create_key, keys::list_keys, keys::revoke_key, whoami::whoami,
        people::create_person, people::list_people, people::get_person,
        people::replace_person, people::delete_person,
        presets::list_presets,
        ops::healthz, ops::readyz, ops::metrics_text, serve,
        events::stream_events, events::action_events,
        subscriptions::create_subscription, subscriptions::list_subscriptions,
        subscriptions::get_subscription, subscriptions::delete_subscription,
        subscriptions::list_deliveries,
        audit::audit_export,
        sessions::list_sessions, sessions::get_session, sessions::end_session,
        sessions::create_plan, sessions::list_plans, sessions::get_plan,
        sessions::approve_plan, sessions::deny_plan, sessions::report_run,
    ),
    modifiers(&BearerAuth, &CommonErrors),
    tags(
        (name = "actions", description = "Requesting and deciding actions"),
        (name = "agents", description = "Agents and their permission profiles"),
        (name = "keys", description = "API keys"),
        (name = "people", description = "People who decide: groups, operator keys, chat identities"),
        (name = "handlers", description = "Executors, the actions they perform, tool schemas"),
        (name = "grants", description = "Standing permissions granted by humans, and requests for them"),
        (name = "operations", description = "Health, readiness, metrics"),
        (name = "events", description = "Event streams (Server-Sent Events)"),
        (name = "subscriptions", description = "Outbound notification webhooks"),
        (name = "audit", description = "Tamper-evident export of the event log"),
        (name = "sessions", description = "Sessions, plans approved at once, runs reported after the fact"),
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

/// Declares the errors every operation of a kind can answer, so each
/// handler's annotation lists only its own: 401 and 503 where a key is
/// checked (against the database), 400/413/415/422 where a JSON body is
/// read, 422 where query parameters are, 400 where a path segment is
/// decoded. Every one is `application/problem+json`; a status the handler
/// already declares keeps its own description.
struct CommonErrors;

impl CommonErrors {
    fn add(op: &mut Operation, status: &str, description: &str) {
        let problem = ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("Problem")))
            .build();
        op.responses
            .responses
            .entry(status.to_owned())
            .or_insert_with(|| {
                RefOr::T(
                    ResponseBuilder::new()
                        .description(description)
                        .content("application/problem+json", problem)
                        .build(),
                )
            });
    }

    fn apply(op: &mut Operation) {
        let has = |place: ParameterIn| {
            op.parameters
                .iter()
                .flatten()
                .any(|p| p.parameter_in == place)
        };
        let (query, path) = (has(ParameterIn::Query), has(ParameterIn::Path));
        if op.security.is_some() {
            Self::add(op, "401", "Missing or unknown key");
            Self::add(op, "503", "The database is busy or closing; retry");
        }
        if op.request_body.is_some() {
            Self::add(op, "400", "The body is not JSON");
            Self::add(op, "413", "The body is over the size limit");
            Self::add(op, "415", "The body is not Content-Type: application/json");
            Self::add(op, "422", "Invalid fields");
        }
        if query {
            Self::add(op, "422", "Invalid query parameter");
        }
        if path {
            Self::add(op, "400", "A path segment does not decode");
        }
    }
}

impl Modify for CommonErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                Self::apply(op);
            }
        }
    }
}

/// The document as pretty JSON with a trailing newline.
pub fn document_json() -> String {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    constraints(&mut doc);
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".to_owned());
    text.push('\n');
    text
}

/// What utoipa's derive cannot say: an approval that edits the action
/// (`detail` or `params`) cannot also `remember` it (422 otherwise). A
/// field sent as `null` is one not sent, as the daemon reads it.
fn constraints(doc: &mut serde_json::Value) {
    if let Some(approve) = doc.pointer_mut("/components/schemas/ApproveBody")
        && let Some(obj) = approve.as_object_mut()
    {
        let given = |field: &str| serde_json::json!({field: {"not": {"type": "null"}}});
        let both = |field: &str| {
            let mut properties = given("remember");
            if let (Some(p), Some(f)) = (properties.as_object_mut(), given(field).as_object()) {
                p.extend(f.clone());
            }
            serde_json::json!({"required": ["remember", field], "properties": properties})
        };
        obj.insert(
            "not".to_owned(),
            serde_json::json!({"anyOf": [both("detail"), both("params")]}),
        );
    }
}

/// The route of the document.
pub fn router() -> axum::Router<crate::state::AppState> {
    axum::Router::new().route("/openapi.json", axum::routing::get(serve))
}

/// This API's OpenAPI 3.1 document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations", operation_id = "openapi",
    responses((status = 200, description = "The OpenAPI document", body = Object)))]
pub async fn serve() -> impl axum::response::IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        document_json(),
    )
}
