//! Sessions of the handshake era belong to the key that opened them. rmcp
//! knows a session only by its `Mcp-Session-Id`; this layer, between the
//! authentication and rmcp, records which key (and agent) the `initialize`
//! that created a session was made with, and answers any other caller's
//! request naming that session (POST, GET stream, DELETE) with the 404 of
//! an unknown session, so another agent's key can neither post into, listen
//! to nor close it, nor learn that it exists.
//!
//! It also keeps, per session, the gate sessions its calls named
//! ([`ConnectionTrail`]): a taint read in one is carried to the next.
//!
//! Closing a session answers 200 with no body, as the official Python and
//! TypeScript SDKs' servers do (rmcp answers 202, which the Python SDK's
//! client logs as "Session termination failed": it takes 200 and 204).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use sha2::{Digest, Sha256};

use actiongate_gate::Caller;
use actiongate_gate::carried_taint::Trail;

/// The header naming a session of the handshake era.
const SESSION_HEADER: &str = "mcp-session-id";

/// Who opened a session.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Owner {
    key_id: String,
    agent: Option<String>,
}

impl Owner {
    fn of(caller: &Caller) -> Owner {
        Owner {
            key_id: caller.key_id.clone(),
            agent: caller.agent.clone(),
        }
    }
}

/// What one MCP session carries for its tool calls (handed to them
/// through the request's extensions): the gate session of its calls that
/// name none, and the gate sessions its calls named
/// (`actiongate_gate::carried_taint`).
#[derive(Clone)]
pub struct ConnectionTrail {
    /// `mcp-` and 16 hex digits of the MCP session id's SHA-256: a
    /// session of its own, named after the connection without showing its
    /// id.
    pub implicit: String,
    /// The gate sessions its calls named.
    pub trail: Arc<Mutex<Trail>>,
}

impl ConnectionTrail {
    fn of(mcp_session: &str) -> ConnectionTrail {
        let digest = hex::encode(Sha256::digest(mcp_session.as_bytes()));
        ConnectionTrail {
            implicit: format!("mcp-{}", &digest[..16]),
            trail: Arc::default(),
        }
    }
}

/// The owners of the live sessions of rmcp's session manager.
#[derive(Clone)]
pub struct SessionOwners {
    owners: Arc<Mutex<HashMap<String, Owner>>>,
    trails: Arc<Mutex<HashMap<String, ConnectionTrail>>>,
    manager: Arc<LocalSessionManager>,
}

impl SessionOwners {
    /// Owners of the sessions `manager` holds.
    pub fn new(manager: Arc<LocalSessionManager>) -> SessionOwners {
        SessionOwners {
            owners: Arc::default(),
            trails: Arc::default(),
            manager,
        }
    }

    fn owner(&self, session: &str) -> Option<Owner> {
        self.owners.lock().ok()?.get(session).cloned()
    }

    /// The trail of live session `session`, made on first use.
    fn trail(&self, session: &str) -> Option<ConnectionTrail> {
        let mut trails = self.trails.lock().ok()?;
        Some(
            trails
                .entry(session.to_owned())
                .or_insert_with(|| ConnectionTrail::of(session))
                .clone(),
        )
    }

    fn forget(&self, session: &str) {
        if let Ok(mut owners) = self.owners.lock() {
            owners.remove(session);
        }
        if let Ok(mut trails) = self.trails.lock() {
            trails.remove(session);
        }
    }

    /// Records `owner` for a new session, and forgets the sessions rmcp
    /// no longer holds (ended idle, or with their client).
    async fn record(&self, session: String, owner: Owner) {
        let live: Vec<String> = {
            let sessions = self.manager.sessions.read().await;
            sessions.keys().map(ToString::to_string).collect()
        };
        if let Ok(mut trails) = self.trails.lock() {
            trails.retain(|id, _| live.iter().any(|l| l == id));
        }
        if let Ok(mut owners) = self.owners.lock() {
            owners.retain(|id, _| live.iter().any(|l| l == id));
            owners.insert(session, owner);
        }
    }
}

/// The answer to a request naming a session its caller did not open: the
/// very answer rmcp gives for a session it does not know.
fn unknown_session() -> Response {
    (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
}

/// Lets a request naming a session through only for the key and agent that
/// opened it; records the owner of each session an `initialize` opens.
pub async fn bind(
    State(owners): State<SessionOwners>,
    mut request: Request,
    next: Next,
) -> Response {
    // The authentication ran before: no caller here is a bug, never a pass.
    let Some(caller) = request.extensions().get::<Caller>().map(Owner::of) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let method = request.method().clone();
    let named = match request.headers().get(SESSION_HEADER) {
        None => None,
        Some(v) => match v.to_str() {
            Ok(s) => Some(s.to_owned()),
            Err(_) => return unknown_session(),
        },
    };
    if let Some(session) = &named
        && owners.owner(session).as_ref() != Some(&caller)
    {
        return unknown_session();
    }
    if let Some(trail) = named.as_deref().and_then(|s| owners.trail(s)) {
        request.extensions_mut().insert(trail);
    }
    let response = next.run(request).await;
    match named {
        None => {
            let opened = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            if let Some(session) = opened {
                owners.record(session, caller).await;
            }
        }
        Some(session) => {
            let status = response.status();
            if method == Method::DELETE && status.is_success() {
                owners.forget(&session);
                return closed(response);
            }
            if status == StatusCode::NOT_FOUND {
                owners.forget(&session);
            }
        }
    }
    response
}

/// A closed session's answer: 200 without a body, whatever rmcp said.
fn closed(response: Response) -> Response {
    let (mut parts, _) = response.into_parts();
    parts.status = StatusCode::OK;
    parts.headers.remove(axum::http::header::CONTENT_TYPE);
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::empty())
}
