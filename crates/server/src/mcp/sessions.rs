//! Sessions of the handshake era belong to the key that opened them. rmcp
//! knows a session only by its `Mcp-Session-Id`; this layer, between the
//! authentication and rmcp, records which key (and agent) the `initialize`
//! that created a session was made with, and answers any other caller's
//! request naming that session (POST, GET stream, DELETE) with the 404 of
//! an unknown session, so another agent's key can neither post into, listen
//! to nor close it, nor learn that it exists.
//!
//! It also keeps, per key, the gate sessions its calls named
//! ([`ConnectionTrail`]): a taint read in one is carried to the next.
//!
//! Closing a session answers 200 with no body, as the official Python and
//! TypeScript SDKs' servers do (rmcp answers 202, which the Python SDK's
//! client logs as "Session termination failed": it takes 200 and 204).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use sha2::{Digest, Sha256};

use actiongate_gate::carried_taint::Trail;
use actiongate_gate::{Caller, Gate};

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

/// What a tool call carries besides its arguments (handed to it through
/// the request's extensions): the gate session of a call that names none
/// (its MCP session's own, or in the stateless era its key's), and the gate sessions the
/// calls of its key named over `/mcp` (`actiongate_gate::carried_taint`).
/// The trail is the key's, not the connection's: a model that waits for
/// its MCP session to idle out and connects again keeps its taint. It is
/// forgotten once the key makes no call for `sessions.idle_timeout`.
#[derive(Clone)]
pub struct ConnectionTrail {
    /// `mcp-` and 16 hex digits of the MCP session id's SHA-256: a
    /// session of its own, named after the connection without showing its
    /// id; in the stateless era, of the key's id and the current
    /// `sessions.idle_timeout` window (`key:<id>@<n>`).
    pub implicit: Option<String>,
    /// The key's own session (`mcp-` and 16 hex digits of `key:<id>`'s
    /// SHA-256): a taint any call of the key meets is written there too,
    /// and carried from there into every session the key names next, so
    /// it holds on every daemon sharing the database, whichever one
    /// answers the key's next call.
    pub key_session: String,
    /// The gate sessions the key's calls named (on this daemon).
    pub trail: Arc<Mutex<Trail>>,
}

impl ConnectionTrail {
    /// After a call in the caller's session `to`: the key's own session
    /// takes a taint `to` holds, for the key's next call on any daemon,
    /// and `to` is linked to it (once `to` is stored), so a taint it meets
    /// later, outside this call (an approval, a task), is recorded there
    /// too. A fault is logged: the call's answer stands.
    pub async fn record(&self, gate: &Gate, caller: &Caller, to: &str) {
        if to == self.key_session {
            return;
        }
        let linked = self.trail.lock().is_ok_and(|t| t.is_linked(to));
        let recorded = match gate
            .carry_taint(caller, &[to.to_owned()], &self.key_session)
            .await
        {
            Ok(carried) => {
                let linked_now = if linked {
                    Ok(false)
                } else {
                    gate.link_carrier(caller, to, &self.key_session).await
                };
                // The key still meets the taint: its time is now, so no
                // daemon lets it lapse while the key keeps calling.
                if carried.tainted
                    && (linked || matches!(linked_now, Ok(true)))
                    && let Err(e) = gate.renew_carried_taint(caller, to).await
                {
                    tracing::warn!(error = %e.detail, session = %to, "cannot renew the taint of the key's own MCP session");
                }
                linked_now
            }
            Err(e) => Err(e),
        };
        match recorded {
            Ok(true) => {
                if let Ok(mut t) = self.trail.lock() {
                    t.mark_linked(to);
                }
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e.detail, session = %to, "cannot record a taint on the key's own MCP session");
            }
        }
    }
}

/// The connection's own gate session: `mcp-` and 16 hex digits derived
/// from its MCP session id.
fn implicit_session(mcp_session: &str) -> String {
    let digest = hex::encode(Sha256::digest(mcp_session.as_bytes()));
    format!("mcp-{}", &digest[..16])
}

/// A key's trail and when the key last called.
struct KeyTrail {
    trail: Arc<Mutex<Trail>>,
    last: Instant,
}

/// Most MCP sessions one key holds open at once (each holds a little
/// memory until it ends or idles out): one per client connection, so far
/// more than a key's clients need.
pub const MOST_SESSIONS_PER_KEY: usize = 100;

/// Most keys whose trails are kept; past it, those idle longest go.
const MOST_TRAILS: usize = 10_000;

/// The owners of the live sessions of rmcp's session manager.
#[derive(Clone)]
pub struct SessionOwners {
    owners: Arc<Mutex<HashMap<String, Owner>>>,
    trails: Arc<Mutex<HashMap<String, KeyTrail>>>,
    idle: Duration,
    manager: Arc<LocalSessionManager>,
}

impl SessionOwners {
    /// Owners of the sessions `manager` holds; keys' trails are forgotten
    /// after `idle` without a call.
    pub fn new(manager: Arc<LocalSessionManager>, idle: Duration) -> SessionOwners {
        SessionOwners {
            owners: Arc::default(),
            trails: Arc::default(),
            idle,
            manager,
        }
    }

    fn owner(&self, session: &str) -> Option<Owner> {
        self.owners.lock().ok()?.get(session).cloned()
    }

    /// The trail of `caller`'s key, made on first use, as of now.
    fn trail(&self, caller: &Owner) -> Option<Arc<Mutex<Trail>>> {
        let mut trails = self.trails.lock().ok()?;
        let now = Instant::now();
        if let Some(t) = trails.get_mut(&caller.key_id)
            && now.duration_since(t.last) < self.idle
        {
            t.last = now;
            return Some(t.trail.clone());
        }
        if trails.len() >= MOST_TRAILS {
            trails.retain(|_, t| now.duration_since(t.last) < self.idle);
            if trails.len() >= MOST_TRAILS
                && let Some(oldest) = trails
                    .iter()
                    .min_by_key(|(_, t)| t.last)
                    .map(|(k, _)| k.clone())
            {
                trails.remove(&oldest);
            }
        }
        let trail = Arc::new(Mutex::new(Trail::default()));
        trails.insert(
            caller.key_id.clone(),
            KeyTrail {
                trail: trail.clone(),
                last: now,
            },
        );
        Some(trail)
    }

    fn forget(&self, session: &str) {
        if let Ok(mut owners) = self.owners.lock() {
            owners.remove(session);
        }
    }

    /// Records `owner` for a new session, and forgets the sessions rmcp
    /// no longer holds (ended idle, or with their client). A key holding
    /// [`MOST_SESSIONS_PER_KEY`] already has the new session closed:
    /// `false`.
    async fn record(&self, session: String, owner: Owner) -> bool {
        // Held while the owners are pruned: a session rmcp opens meanwhile
        // (it is stored before its answer is sent) is not taken for gone.
        let live = self.manager.sessions.read().await;
        let admitted = match self.owners.lock() {
            Ok(mut owners) => {
                owners.retain(|id, _| live.contains_key(id.as_str()));
                let held = owners.values().filter(|o| o.key_id == owner.key_id).count();
                let admitted = held < MOST_SESSIONS_PER_KEY;
                if admitted {
                    owners.insert(session.clone(), owner);
                }
                admitted
            }
            Err(_) => false,
        };
        drop(live);
        if !admitted {
            use rmcp::transport::streamable_http_server::SessionManager;
            let _ = self.manager.close_session(&session.into()).await;
        }
        admitted
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
    if let Some(trail) = owners.trail(&caller) {
        request.extensions_mut().insert(ConnectionTrail {
            // The stateless era names no MCP session: a call naming no
            // gate session is then in one of the key's, so that leaving
            // the session out sheds no taint there either. A new one each
            // `sessions.idle_timeout`, so a taint is not the key's for
            // good: it is carried into the next only while it is recent.
            implicit: Some(match named.as_deref() {
                Some(mcp_session) => implicit_session(mcp_session),
                None => {
                    let window = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default()
                        .as_secs()
                        / owners.idle.as_secs().max(1);
                    implicit_session(&format!("key:{}@{window}", caller.key_id))
                }
            }),
            key_session: implicit_session(&format!("key:{}", caller.key_id)),
            trail,
        });
    }
    let response = next.run(request).await;
    match named {
        None => {
            let opened = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            if let Some(session) = opened
                && !owners.record(session, caller).await
            {
                return crate::error::ApiError::from(actiongate_gate::GateError::limit_reached(
                    format!(
                        "this key holds {MOST_SESSIONS_PER_KEY} MCP sessions already: close one \
                     (DELETE /mcp with its Mcp-Session-Id) or let one end idle"
                    ),
                ))
                .into_response();
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
