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
    /// `action_string`, `params_digest` (handler actions: `sha256:` of the
    /// params in canonical JSON), `outcome` (`allowed`, `denied`, `expired`,
    /// `cancelled`), `decided_by`, `deciders` (`[{id, via}]`, the humans),
    /// `decided_at`, `iat`, `iss`, `v`.
    #[schema(value_type = Object)]
    pub claims: Value,
}
