//! Sessions of the handshake era belong to the key that opened them. rmcp
//! knows a session only by its `Mcp-Session-Id`; this layer, between the
//! authentication and rmcp, records which key (and agent) the `initialize`
//! that created a session was made with, and answers any other caller's
//! request naming that session (POST, GET stream, DELETE) with the 404 of
//! an unknown session, so another agent's key can neither post into, listen
//! to nor close it, nor learn that it exists.
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

use actiongate_gate::Caller;

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

/// The owners of the live sessions of rmcp's session manager.
#[derive(Clone)]
pub struct SessionOwners {
    owners: Arc<Mutex<HashMap<String, Owner>>>,
    manager: Arc<LocalSessionManager>,
}

impl SessionOwners {
    /// Owners of the sessions `manager` holds.
    pub fn new(manager: Arc<LocalSessionManager>) -> SessionOwners {
        SessionOwners {
            owners: Arc::default(),
            manager,
        }
    }

    fn owner(&self, session: &str) -> Option<Owner> {
        self.owners.lock().ok()?.get(session).cloned()
    }

    fn forget(&self, session: &str) {
        if let Ok(mut owners) = self.owners.lock() {
            owners.remove(session);
        }
    }

    /// Records `owner` for a new session, and forgets the sessions rmcp
    /// no longer holds (ended idle, or with their client).
    async fn record(&self, session: String, owner: Owner) {
        let live: Vec<String> = {
            let sessions = self.manager.sessions.read().await;
            sessions.keys().map(ToString::to_string).collect()
        };
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
pub async fn bind(State(owners): State<SessionOwners>, request: Request, next: Next) -> Response {
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
