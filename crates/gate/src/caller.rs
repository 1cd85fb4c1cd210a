//! Who is calling: API keys (how they are made and hashed, how a secret
//! becomes a [`Caller`]), and what a caller may do.

use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use actiongate_store::{NewKey, Role, Store};

use crate::error::GateError;

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
    /// Who decides, when not a key: a human known to an adapter
    /// (`telegram:<user id>`, `slack:<user id>`, ...). Recorded instead of
    /// `key:<id>` as `decided_by` and `granted_by`.
    pub via: Option<String>,
}

impl Caller {
    /// Fails with 403 unless the key's role is at least `role`.
    pub fn require(&self, role: Role) -> Result<(), GateError> {
        if self.role >= role {
            Ok(())
        } else {
            Err(GateError::forbidden(format!(
                "this needs a key with the {} role; this key is {}",
                role.as_str(),
                self.role.as_str()
            )))
        }
    }

    /// The agent this key acts as, or 403 if it acts for none.
    pub fn agent_id(&self) -> Result<&str, GateError> {
        self.agent.as_deref().ok_or_else(|| {
            GateError::forbidden("this key is not bound to an agent; issue one with an agent id")
        })
    }

    /// Fails with 403 when this key is bound to an agent that `agent` (an
    /// approval's or a grant's; `None` for any agent) includes: nobody
    /// approves or grants for themselves, whatever their key's role.
    pub fn not_for_own(&self, agent: Option<&str>) -> Result<(), GateError> {
        match (&self.agent, agent) {
            (Some(own), Some(agent)) if own != agent => Ok(()),
            (Some(own), _) => Err(GateError::forbidden(format!(
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

    /// Whoever runs a command on the daemon's data dir or database itself
    /// (`actiongate keys ...`): holding them is holding every key, so this
    /// caller administers. Recorded as `local`.
    pub fn local() -> Caller {
        Caller {
            key_id: "local".to_owned(),
            name: "local command line".to_owned(),
            role: Role::Admin,
            agent: None,
            via: Some("local".to_owned()),
        }
    }

    /// An operator known to an adapter rather than by a key: a chat
    /// user on the connector's list of approvers. `identity` is what the
    /// decision records, e.g. `telegram:1234`.
    pub fn human(identity: String) -> Caller {
        Caller {
            key_id: String::new(),
            name: identity.clone(),
            role: Role::Operator,
            agent: None,
            via: Some(identity),
        }
    }

    /// The identity recorded as `decided_by` / `granted_by`.
    pub fn identity(&self) -> String {
        match &self.via {
            Some(who) => who.clone(),
            None => format!("key:{}", self.key_id),
        }
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
    /// Its place in `limits.max_open_per_key`.
    _held: Option<crate::holds::Held>,
}

impl KeyGuard {
    /// A guard for `key_id`, told of revocations by `revocations`.
    pub fn new(store: Store, key_id: String, revocations: watch::Receiver<u64>) -> KeyGuard {
        KeyGuard {
            store,
            key_id,
            revocations,
            _held: None,
        }
    }

    /// The guard, counting `held` against its key's limit while it lives.
    pub fn holding(mut self, held: crate::holds::Held) -> KeyGuard {
        self._held = Some(held);
        self
    }

    /// Waits until some key was revoked through the API; `false` when no
    /// more can be (the daemon is stopping). Cancel-safe.
    pub async fn changed(&mut self) -> bool {
        self.revocations.changed().await.is_ok()
    }

    /// Returns once the key is revoked; never if the daemon stops first.
    /// Cancel-safe.
    pub async fn revoked(&mut self) {
        loop {
            if !self.changed().await {
                std::future::pending::<()>().await;
            }
            if !self.active().await {
                return;
            }
        }
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
