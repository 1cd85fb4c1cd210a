//! API keys: how they are made and hashed, and the `Caller` extractor that
//! turns `Authorization: Bearer <key>` into who is calling.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

use actiongate_store::{NewKey, Role, Store};
use tokio::sync::watch;

use crate::error::ApiError;
use crate::state::AppState;

/// A freshly made key: the secret is shown once, only the hash is stored.
pub struct IssuedKey {
    /// What is stored.
    pub record: NewKey,
    /// The bearer token, `agk_…`.
    pub secret: String,
}

/// Makes a key with 256 random bits.
pub fn issue_key(role: Role, agent: Option<String>, name: Option<String>) -> IssuedKey {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let secret = format!(
        "agk_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let mut id_bytes = [0u8; 8];
    rand::rng().fill_bytes(&mut id_bytes);
    let id = format!("key_{}", hex::encode(id_bytes));
    let name = name.unwrap_or_else(|| match &agent {
        Some(a) => format!("{} key for {a}", role.as_str()),
        None => format!("{} key", role.as_str()),
    });
    IssuedKey {
        record: NewKey {
            id,
            name,
            role,
            agent,
            hash: hash_key(&secret),
        },
        secret,
    }
}

/// Keys carry 256 bits of entropy, so a plain SHA-256 is a safe hash for
/// them (a slow password hash would buy nothing and cost every request).
pub fn hash_key(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Who is calling, from a valid key.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The key's id.
    pub key_id: String,
    /// The key's name.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// The agent it acts as.
    pub agent: Option<String>,
}

impl Caller {
    /// Fails with 403 unless the key's role is at least `role`.
    pub fn require(&self, role: Role) -> Result<(), ApiError> {
        if self.role >= role {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "this needs a key with the {} role; this key is {}",
                role.as_str(),
                self.role.as_str()
            )))
        }
    }

    /// The agent this key acts as, or 403 if it acts for none.
    pub fn agent_id(&self) -> Result<&str, ApiError> {
        self.agent.as_deref().ok_or_else(|| {
            ApiError::forbidden("this key is not bound to an agent; issue one with an agent id")
        })
    }

    /// Fails with 403 when this key is bound to an agent that `agent` (an
    /// approval's or a grant's; `None` for any agent) includes: nobody
    /// approves or grants for themselves, whatever their key's role.
    pub fn not_for_own(&self, agent: Option<&str>) -> Result<(), ApiError> {
        match (&self.agent, agent) {
            (Some(own), Some(agent)) if own != agent => Ok(()),
            (Some(own), _) => Err(ApiError::forbidden(format!(
                "this key acts as agent '{own}', and nobody approves or grants for themselves: \
                 use a key bound to no agent, or another agent"
            ))),
            (None, _) => Ok(()),
        }
    }

    /// Whether the caller sees every agent's resources (operators and admins).
    pub fn sees_all(&self) -> bool {
        self.role >= Role::Operator
    }

    /// Whether the caller may see a resource of `agent`.
    pub fn may_see(&self, agent: &str) -> bool {
        self.sees_all() || self.agent.as_deref() == Some(agent)
    }

    /// The identity recorded as `decided_by` / `granted_by`.
    pub fn identity(&self) -> String {
        format!("key:{}", self.key_id)
    }
}

/// A caller whose key has at least the operator role. As an extractor it
/// answers 403 before the request's path or body is looked at, so a key
/// without the role learns nothing from how its request was malformed.
#[derive(Debug, Clone)]
pub struct Operator(pub Caller);

/// A caller whose key has the admin role (see [`Operator`]).
#[derive(Debug, Clone)]
pub struct Admin(pub Caller);

/// The caller, if its key has at least `role`.
async fn with_role(parts: &mut Parts, state: &AppState, role: Role) -> Result<Caller, ApiError> {
    let caller = Caller::from_request_parts(parts, state).await?;
    caller.require(role)?;
    Ok(caller)
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        with_role(parts, state, Role::Operator).await.map(Operator)
    }
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        with_role(parts, state, Role::Admin).await.map(Admin)
    }
}

/// Tells what a key holds open (an event stream) that the key was revoked.
///
/// A request is authorized once, when it arrives; a stream outlives that.
/// Revocations through the API are announced at once ([`KeyGuard::changed`]);
/// `actiongate keys revoke` on the data dir is not, so a stream also asks
/// [`KeyGuard::active`] now and then (at its heartbeats).
pub struct KeyGuard {
    store: Store,
    key_id: String,
    revocations: watch::Receiver<u64>,
}

impl KeyGuard {
    /// A guard for `key_id`, told of revocations by `revocations`.
    pub fn new(store: Store, key_id: String, revocations: watch::Receiver<u64>) -> KeyGuard {
        KeyGuard {
            store,
            key_id,
            revocations,
        }
    }

    /// Waits until some key was revoked through the API; `false` when no
    /// more can be (the daemon is stopping). Cancel-safe.
    pub async fn changed(&mut self) -> bool {
        self.revocations.changed().await.is_ok()
    }

    /// Whether the key is still active. An error reading it counts as
    /// revoked: the stream ends and the client, reconnecting, is asked for
    /// its key again.
    pub async fn active(&self) -> bool {
        match self.store.key_active(&self.key_id).await {
            Ok(active) => active,
            Err(e) => {
                tracing::warn!(error = %e, "cannot check a stream's key; closing the stream");
                false
            }
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .ok_or_else(|| ApiError::unauthorized("send Authorization: Bearer <key>"))?;
        let value = header
            .to_str()
            .map_err(|_| ApiError::unauthorized("the Authorization header is not text"))?;
        // The scheme's name is case-insensitive (RFC 9110, 11.1).
        let token = value
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ApiError::unauthorized("use the Bearer scheme: Authorization: Bearer <key>")
            })?;
        let hash = hash_key(token);
        let ticket = match state.keys().get(&hash) {
            Ok(caller) => return Ok(caller),
            Err(ticket) => ticket,
        };
        let key = state
            .store()
            .find_key(&hash)
            .await?
            .ok_or_else(|| ApiError::unauthorized("unknown or revoked key"))?;
        let caller = Caller {
            key_id: key.id,
            name: key.name,
            role: key.role,
            agent: key.agent,
        };
        state.keys().insert(ticket, &hash, caller.clone());
        Ok(caller)
    }
}
