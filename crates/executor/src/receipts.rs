//! `--require-human-receipt`: run only what a human allowed, as a signed
//! decision receipt in the delivery proves, checked against the daemon's
//! receipt key (a JWK file). Whoever holds only the webhook secret can sign
//! a delivery but not a receipt, so a leaked secret runs nothing.

use std::path::Path;

use actiongate_receipt::{ReceiptVerifier, params_digest};
use serde_json::Value;

/// Why a delivery's receipt was refused.
pub type Refusal = String;

/// Reads the receipt key (a JWK as `actiongate receipt key` prints it).
pub fn load_key(path: &Path) -> Result<ReceiptVerifier, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let jwk: Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
    ReceiptVerifier::from_jwk(&jwk).map_err(|e| format!("{}: {e}", path.display()))
}

/// What a delivery says about itself, to hold its receipt against.
pub struct Delivered<'a> {
    /// `action_id`.
    pub action_id: &'a str,
    /// `handler`.
    pub handler: &'a str,
    /// `action`.
    pub action: &'a str,
    /// `params`.
    pub params: &'a Value,
    /// `receipt`, if any.
    pub receipt: Option<&'a str>,
}

/// `Ok` when the delivery carries a receipt signed by `key` saying a human
/// allowed exactly this action of this handler with exactly these params.
pub fn check(key: &ReceiptVerifier, d: &Delivered<'_>) -> Result<(), Refusal> {
    let receipt = d
        .receipt
        .ok_or("the delivery carries no receipt, and this executor requires one")?;
    let claims = key.verify(receipt).map_err(|e| e.to_string())?;
    if claims.action_id != d.action_id {
        return Err("the receipt is about another action".into());
    }
    if claims.handler.as_deref() != Some(d.handler) || claims.action.as_deref() != Some(d.action) {
        return Err("the receipt is about another handler or action".into());
    }
    if claims.params_digest.as_deref() != Some(params_digest(d.params).as_str()) {
        return Err("the params differ from the ones the receipt binds".into());
    }
    if !claims.human_allowed() {
        return Err(format!(
            "no human allowed this action (outcome {}, decided by {})",
            claims.outcome,
            claims.decided_by.as_deref().unwrap_or("-")
        ));
    }
    Ok(())
}
