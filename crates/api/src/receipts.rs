//! Wire types of signed decision receipts (`docs/receipts.md`).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A settled decision's receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ActionReceipt {
    /// The action it is about.
    pub action_id: String,
    /// The receipt: a JWS in compact form (`alg` `EdDSA`, `typ`
    /// `actiongate-receipt+jwt`), verifiable offline with the key at
    /// `/.well-known/actiongate-receipt-key`.
    pub receipt: String,
    /// What the receipt states (its decoded payload): `action_id`, `agent`,
    /// `action_string`, `params_digest` (handler actions: `hmac-sha256:` of
    /// the params in canonical JSON under `params_key`), `outcome`
    /// (`allowed`, `denied`, `expired`, `cancelled`), `decided_by`,
    /// `deciders` (`[{id, via}]`, the humans), `decided_at`, `iat`, `iss`,
    /// `v`.
    #[schema(value_type = Object)]
    pub claims: Value,
    /// The key of `params_digest` (base64url, 32 bytes), for whoever may
    /// see the params it binds: the action's own agent, or any reader when
    /// no param is sensitive. Absent otherwise, and for decision-only
    /// actions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_key: Option<String>,
}
