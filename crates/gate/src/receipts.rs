//! Signed decision receipts: the daemon's receipt key (made once, kept in
//! the database every daemon shares) and the receipt of a settled
//! decision, made from the stored action whenever it is asked for (Ed25519
//! is deterministic: every daemon gives the same receipt for the same
//! decision). The format is `actiongate_receipt`'s.

use actiongate_api::model::{Action, ActionStatus};
use actiongate_api::receipts::ActionReceipt;
use actiongate_receipt::{
    Decider, RECEIPT_VERSION, ReceiptClaims, ReceiptSigner, deciders_of, encode_params_key,
    params_digest,
};
use actiongate_store::receipts::StoredReceiptKey;
use serde_json::Value;
use std::time::Instant;

use crate::{Caller, Gate, GateError, GateResult};

/// The receipt signing key once read or made, and the last failure to
/// make it.
#[derive(Default)]
pub(crate) struct SignerCell {
    signer: tokio::sync::OnceCell<ReceiptSigner>,
    /// Taken by whoever reads or makes the key; holds when the last
    /// attempt failed and why.
    making: tokio::sync::Mutex<Option<(Instant, GateError)>>,
}

impl Gate {
    /// The receipt signing key: the one stored, or a new one stored now
    /// when this database has none (the first daemon's wins a race). One
    /// caller at a time tries; those that waited their turn meanwhile get
    /// its failure (a busy database) rather than each waiting out a busy
    /// timeout of its own.
    pub async fn receipt_signer(&self) -> GateResult<&ReceiptSigner> {
        let cell = &self.0.receipt_signer;
        if let Some(signer) = cell.signer.get() {
            return Ok(signer);
        }
        let asked = Instant::now();
        let mut failed = cell.making.lock().await;
        if let Some(signer) = cell.signer.get() {
            return Ok(signer);
        }
        if let Some((at, e)) = &*failed
            && *at >= asked
        {
            return Err(e.clone());
        }
        match self.read_or_make_receipt_key().await {
            Ok(signer) => {
                *failed = None;
                Ok(cell.signer.get_or_init(|| async { signer }).await)
            }
            Err(e) => {
                *failed = Some((Instant::now(), e.clone()));
                Err(e)
            }
        }
    }

    async fn read_or_make_receipt_key(&self) -> GateResult<ReceiptSigner> {
        let seed: [u8; 32] = rand::random();
        let fresh = ReceiptSigner::from_seed(&seed).map_err(|e| {
            tracing::error!(error = %e, "cannot make a receipt key");
            GateError::internal()
        })?;
        let candidate = StoredReceiptKey {
            kid: fresh.kid().to_owned(),
            seed: hex::encode(seed),
        };
        let stored = self.store().receipt_key(candidate).await?;
        ReceiptSigner::from_hex(&stored.seed).map_err(|e| {
            tracing::error!(error = %e, "the stored receipt key is unusable");
            GateError::internal()
        })
    }

    /// The public receipt key as a JWK.
    pub async fn receipt_key(&self) -> GateResult<Value> {
        Ok(self.receipt_signer().await?.jwk())
    }

    /// The receipt of action `id`, once its decision is settled (a pending
    /// action has none yet: 409).
    pub async fn action_receipt(&self, caller: &Caller, id: &str) -> GateResult<ActionReceipt> {
        let action = self.visible_action(caller, id).await?;
        if action.status == ActionStatus::Pending {
            return Err(GateError::conflict(format!(
                "action '{id}' is pending: it has a receipt once it is decided"
            )));
        }
        let params = match action.handler {
            Some(_) => self.store().action_params(id).await?,
            None => None,
        };
        let params = params
            .map(|p| serde_json::from_str::<Value>(&p))
            .transpose()
            .map_err(|e| {
                tracing::error!(action = %id, error = %e, "stored params are not JSON");
                GateError::internal()
            })?;
        let decided = self.decided_string(&action, params.as_ref()).await;
        let signer = self.receipt_signer().await?;
        let key = signer.params_key(&action.id);
        let digest = params.as_ref().map(|p| params_digest(p, &key));
        let mut claims = receipt_claims(&action, digest, decided);
        if claims.outcome == "cancelled"
            && self.is_agent_identity(claims.decided_by.as_deref()).await?
        {
            // The agent withdrew its own request: no human decided.
            claims.deciders.clear();
        }
        let receipt = self.sign_receipt(&claims).await?;
        let params_key = match &params {
            Some(p) if self.may_see_params(caller, &action, p).await => {
                Some(encode_params_key(&key))
            }
            _ => None,
        };
        let claims = serde_json::to_value(&claims).map_err(|_| GateError::internal())?;
        Ok(ActionReceipt {
            action_id: action.id,
            receipt,
            claims,
            params_key,
        })
    }

    /// Whether `caller` may be given the key of `action`'s params digest:
    /// its own agent (who sent the params), or anyone who may read the
    /// receipt when no param is sensitive (the params it reads are then
    /// the ones bound). With a sensitive value, or a registration that no
    /// longer says which are, nobody else: the key would let them try
    /// every value of a short secret against the digest.
    async fn may_see_params(&self, caller: &Caller, action: &Action, params: &Value) -> bool {
        if caller.agent.as_deref() == Some(action.agent.as_str()) {
            return true;
        }
        let (Some(handler), Some(name)) = (action.handler.as_deref(), action.action.as_deref())
        else {
            return false;
        };
        match self.handler(handler).await {
            Ok(h) => h
                .action(name)
                .is_some_and(|decl| decl.masked(params) == *params),
            Err(_) => false,
        }
    }

    /// Whether `decided_by` names an agent's key (`key:<id>` of a key with
    /// the agent role).
    async fn is_agent_identity(&self, decided_by: Option<&str>) -> GateResult<bool> {
        let Some(id) = decided_by.and_then(|d| d.strip_prefix("key:")) else {
            return Ok(false);
        };
        Ok(self
            .store()
            .list_keys()
            .await?
            .iter()
            .any(|k| k.id == id && k.role == actiongate_store::Role::Agent))
    }

    /// The action string that was decided, as it runs: the action's own,
    /// or after an edit the edited one (a decision-only action's approved
    /// detail; a handler action's as rendered at the edit, or, for an
    /// edit recorded before that was kept, from its edited `params` as its
    /// registration renders them now, or the asked one if the action is
    /// gone from it: the params digest binds the params either way).
    pub async fn decided_string(&self, action: &Action, params: Option<&Value>) -> String {
        if !action.team.edited {
            return action.action_string.clone();
        }
        if let Some(detail) = &action.team.approved_detail {
            return actiongate_policy::format_action(&action.tool, detail);
        }
        if let Some(string) = &action.team.approved_action_string {
            return string.clone();
        }
        if let (Some(handler), Some(name), Some(params)) =
            (action.handler.as_deref(), action.action.as_deref(), params)
            && let Ok(h) = self.handler(handler).await
            && let Some(decl) = h.action(name)
        {
            return actiongate_policy::format_action(handler, &decl.detail(params));
        }
        action.action_string.clone()
    }

    /// The digest binding action `action_id`'s `params` in its receipt, and
    /// its key as a delivery carries it (base64url).
    pub async fn params_digest(
        &self,
        action_id: &str,
        params: &Value,
    ) -> GateResult<(String, String)> {
        let key = self.receipt_signer().await?.params_key(action_id);
        Ok((params_digest(params, &key), encode_params_key(&key)))
    }

    /// Signs `claims` with the receipt key.
    pub async fn sign_receipt(&self, claims: &ReceiptClaims) -> GateResult<String> {
        self.receipt_signer().await?.sign(claims).map_err(|e| {
            tracing::error!(error = %e, "signing a receipt failed");
            GateError::internal()
        })
    }
}

/// What the receipt of `action` (decided, not pending) states;
/// `params_digest` binds a handler action's params as sent
/// ([`Gate::params_digest`]), `action_string` is the one decided
/// ([`Gate::decided_string`]).
pub fn receipt_claims(
    action: &Action,
    params_digest: Option<String>,
    action_string: String,
) -> ReceiptClaims {
    let outcome = match action.status {
        ActionStatus::Denied => "denied",
        ActionStatus::Expired => "expired",
        ActionStatus::Cancelled => "cancelled",
        _ => "allowed",
    };
    let decided = action.decided_at.unwrap_or(action.created_at);
    ReceiptClaims {
        v: RECEIPT_VERSION,
        iss: "actiongate".to_owned(),
        action_id: action.id.clone(),
        agent: action.agent.clone(),
        action_string,
        handler: action.handler.clone(),
        action: action.action.clone(),
        params_digest,
        outcome: outcome.to_owned(),
        decided_by: action.decided_by.clone(),
        deciders: deciders(action, outcome),
        decided_at: action
            .decided_at
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        iat: decided.timestamp(),
    }
}

/// The humans who decided `action`: for an approval, every person of its
/// quorum (each identity and the channel it came through), so a receipt
/// shows the count was met; otherwise the one who decided, through the
/// channel the decision came.
fn deciders(action: &Action, outcome: &str) -> Vec<Decider> {
    let approvals = &action.team.approvals;
    if outcome == "allowed"
        && !approvals.is_empty()
        && deciders_of(action.decided_by.as_deref()).len() == 1
    {
        return approvals
            .iter()
            .map(|a| Decider {
                id: a.by.clone(),
                via: a.channel.clone(),
            })
            .collect();
    }
    // The one human's channel as recorded when they decided; the prefix
    // of their identity only guesses it (a key may speak through MCP).
    let mut one = deciders_of(action.decided_by.as_deref());
    if let (Some(d), Some(channel)) = (one.first_mut(), &action.team.decided_channel) {
        d.via = channel.clone();
    }
    one
}
