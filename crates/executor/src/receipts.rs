//! `--require-human-receipt`: run only what a human allowed, as a signed
//! decision receipt in the delivery proves, checked against the daemon's
//! receipt key (a JWK file). Whoever holds only the webhook secret can sign
//! a delivery but not a receipt, so a leaked secret runs nothing new; a
//! receipt a human gave earlier is refused once older than
//! `--receipt-max-age`, so it cannot be replayed for long to an executor
//! that keeps no record of having run it (a fresh replica).

use std::path::Path;

use actiongate_receipt::{ReceiptVerifier, decode_params_key, params_digest, params_digest_v1};
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
    /// `params_key`: the key of the receipt's params digest.
    pub params_key: Option<&'a str>,
}

/// `Ok` when the delivery carries a receipt signed by `key` saying a human
/// allowed exactly this action of this handler with exactly these params,
/// at most `max_age` before `now` (Unix seconds).
pub fn check(
    key: &ReceiptVerifier,
    d: &Delivered<'_>,
    max_age: std::time::Duration,
    now: i64,
) -> Result<(), Refusal> {
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
    // Whoever forged a delivery chooses the key too; no key and params
    // give the digest of other params (HMAC-SHA256 under a 32-byte key).
    // A receipt of format 1, from a daemon not upgraded yet, binds them
    // by a plain SHA-256, so executors can be upgraded first.
    let digest = if claims.v == 1 {
        params_digest_v1(d.params)
    } else {
        let key = d
            .params_key
            .and_then(decode_params_key)
            .ok_or("the delivery carries no params_key (32 bytes, base64url) for its receipt")?;
        params_digest(d.params, &key)
    };
    if claims.params_digest.as_deref() != Some(digest.as_str()) {
        return Err("the params differ from the ones the receipt binds".into());
    }
    let age = now.saturating_sub(claims.iat);
    if age > i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX) {
        return Err(format!(
            "the receipt was given {age} s ago, longer than --receipt-max-age ({} s): \
             a delivery that late is taken for a replay",
            max_age.as_secs()
        ));
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use actiongate_receipt::{RECEIPT_VERSION, ReceiptClaims, ReceiptSigner, deciders_of};
    use serde_json::json;

    use super::*;

    const DECIDED: i64 = 1_800_000_000;

    /// A delivery of action `0190` (`fs`/`read_file`) with `params`,
    /// `receipt` and `params_key`.
    fn delivered<'a>(
        params: &'a Value,
        receipt: &'a str,
        params_key: Option<&'a str>,
    ) -> Delivered<'a> {
        Delivered {
            action_id: "0190",
            handler: "fs",
            action: "read_file",
            params,
            receipt: Some(receipt),
            params_key,
        }
    }

    /// A human's approval of action `0190` in format `v`, binding params
    /// by `digest`.
    fn approval(v: u32, digest: String) -> ReceiptClaims {
        ReceiptClaims {
            v,
            iss: "actiongate".into(),
            action_id: "0190".into(),
            agent: "a1".into(),
            action_string: "tool:fs:read a.txt".into(),
            handler: Some("fs".into()),
            action: Some("read_file".into()),
            params_digest: Some(digest),
            outcome: "allowed".into(),
            decided_by: Some("key:k1".into()),
            deciders: deciders_of(Some("key:k1")),
            decided_at: None,
            iat: DECIDED,
        }
    }

    fn signed(params: &Value) -> (ReceiptVerifier, String, String) {
        let signer = ReceiptSigner::from_seed(&[9; 32]).unwrap();
        let params_key = signer.params_key("0190");
        let claims = approval(RECEIPT_VERSION, params_digest(params, &params_key));
        let verifier = ReceiptVerifier::from_jwk(&signer.jwk()).unwrap();
        let encoded = actiongate_receipt::encode_params_key(&params_key);
        (verifier, signer.sign(&claims).unwrap(), encoded)
    }

    #[test]
    fn a_human_receipt_older_than_the_limit_is_a_replay() {
        let params = json!({"filepath": "a.txt"});
        let (key, receipt, params_key) = signed(&params);
        let d = delivered(&params, &receipt, Some(&params_key));
        let day = Duration::from_secs(24 * 3600);
        assert_eq!(check(&key, &d, day, DECIDED + 60), Ok(()));
        assert_eq!(check(&key, &d, day, DECIDED + 24 * 3600), Ok(()));
        let late = check(&key, &d, day, DECIDED + 24 * 3600 + 1).unwrap_err();
        assert!(late.contains("--receipt-max-age"), "{late}");
        assert!(check(&key, &d, Duration::from_secs(30), DECIDED + 31).is_err());
    }

    #[test]
    fn a_receipt_of_format_1_binds_its_params_by_a_plain_digest() {
        let signer = ReceiptSigner::from_seed(&[9; 32]).unwrap();
        let key = ReceiptVerifier::from_jwk(&signer.jwk()).unwrap();
        let params = json!({"filepath": "a.txt"});
        let claims = approval(1, params_digest_v1(&params));
        let receipt = signer.sign(&claims).unwrap();
        let day = Duration::from_secs(24 * 3600);
        let other = json!({"filepath": "b.txt"});
        for (p, ok) in [(&params, true), (&other, false)] {
            let d = delivered(p, &receipt, None);
            assert_eq!(check(&key, &d, day, DECIDED + 1).is_ok(), ok, "{p}");
        }
        // A format 2 receipt whose digest is a plain one is not taken as
        // format 1.
        let mut v2 = claims.clone();
        v2.v = 2;
        let receipt = signer.sign(&v2).unwrap();
        let d = delivered(&params, &receipt, None);
        assert!(check(&key, &d, day, DECIDED + 1).is_err());
    }

    #[test]
    fn other_params_or_another_key_do_not_match_the_receipt() {
        let params = json!({"filepath": "a.txt"});
        let (key, receipt, params_key) = signed(&params);
        let at = DECIDED + 1;
        let day = Duration::from_secs(24 * 3600);
        let other = json!({"filepath": "b.txt"});
        let forged = actiongate_receipt::encode_params_key(&[1; 32]);
        for (p, k) in [
            (&other, Some(params_key.as_str())),
            (&params, Some(forged.as_str())),
            (&params, None),
            (&params, Some("c2hvcnQ")),
        ] {
            let d = delivered(p, &receipt, k);
            assert!(check(&key, &d, day, at).is_err(), "{p} {k:?}");
        }
    }
}
