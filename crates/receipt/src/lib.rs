//! Signed decision receipts: what a settled decision of actiongate says
//! (which action, whose, exactly what, the outcome, who decided and when),
//! signed by the daemon's Ed25519 key as a JWS in compact form (`alg`
//! `EdDSA`, RFC 8037), and checked offline against the public key as a JWK.
//!
//! Signing and checking go through `jsonwebtoken` (RustCrypto's
//! `ed25519-dalek` underneath); this crate adds the claims, the canonical
//! params digest and the key's id. Ed25519 signatures are deterministic: the
//! same decision signed by the same key gives the same receipt every time,
//! so a receipt can be made whenever it is asked for, by any daemon sharing
//! the key.

use std::collections::HashSet;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The `typ` header of a receipt.
pub const RECEIPT_TYP: &str = "actiongate-receipt+jwt";

/// The claims' format version (2: params bound by a keyed digest).
pub const RECEIPT_VERSION: u32 = 2;

/// Everything a receipt states.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptClaims {
    /// Format version ([`RECEIPT_VERSION`]).
    pub v: u32,
    /// Always `actiongate`.
    pub iss: String,
    /// The action's id.
    pub action_id: String,
    /// The agent that asked.
    pub agent: String,
    /// The exact action string decided (`tool:<tool>:<detail>`).
    pub action_string: String,
    /// For handler actions: the handler and its action name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler: Option<String>,
    /// The handler's action name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// For handler actions: `hmac-sha256:<hex>` of the params as sent, in
    /// canonical JSON, under the action's params key ([`params_digest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_digest: Option<String>,
    /// `allowed`, `denied`, `expired` or `cancelled`.
    pub outcome: String,
    /// Who decided, as the action records it: `policy`, `grant:<id>`,
    /// `deadline`, `key:<id>`, `telegram:<user>`, ...
    pub decided_by: Option<String>,
    /// The humans who decided (empty when the policy, a grant or the
    /// deadline did).
    pub deciders: Vec<Decider>,
    /// When it was decided, RFC 3339.
    pub decided_at: Option<String>,
    /// When the receipt's statement was first true (the decision's time, in
    /// seconds since the epoch; the same on every copy of the receipt).
    pub iat: i64,
}

impl ReceiptClaims {
    /// Whether a human allowed the action: what an executor that trusts no
    /// webhook secret alone asks before running it.
    pub fn human_allowed(&self) -> bool {
        self.outcome == "allowed" && !self.deciders.is_empty()
    }
}

/// A human who decided, and the channel the decision came through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decider {
    /// The identity recorded (`key:<id>`, `telegram:<user>`, `local`, ...).
    pub id: String,
    /// The channel: `api`, `telegram`, `slack`, `discord`, `whatsapp`, `local`.
    pub via: String,
}

/// The humans behind a `decided_by`: none for the policy, a grant or the
/// deadline; otherwise the one identity, its channel taken from its prefix.
pub fn deciders_of(decided_by: Option<&str>) -> Vec<Decider> {
    let Some(who) = decided_by else {
        return Vec::new();
    };
    if who == "policy" || who == "deadline" || who.starts_with("grant:") || who.is_empty() {
        return Vec::new();
    }
    let via = match who.split_once(':') {
        Some(("key", _)) => "api",
        Some((channel, _)) => channel,
        None => who,
    };
    vec![Decider {
        id: who.to_owned(),
        via: via.to_owned(),
    }]
}

/// JSON with object keys sorted (by their UTF-8 bytes) and no whitespace:
/// the same value always gives the same bytes, whatever order it arrived in.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(val) = map.get(k) {
                    write_canonical(val, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// `sha256:<hex>`: SHA-256 of the canonical JSON of `params`, the params
/// digest of a receipt of format 1 (before the digest was keyed), which
/// daemons before that version still sign.
pub fn params_digest_v1(params: &Value) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical_json(params).as_bytes()))
    )
}

/// `hmac-sha256:<hex>`: HMAC-SHA256 of the canonical JSON of `params`
/// under `key`, the action's params key ([`ReceiptSigner::params_key`]).
///
/// Keyed, so that whoever holds a receipt but may not see a param (a PIN
/// or a one-time code a handler marks sensitive) cannot try every value
/// against the digest; whoever may see the params is given the key.
pub fn params_digest(params: &Value, key: &[u8]) -> String {
    format!(
        "hmac-sha256:{}",
        hex::encode(hmac_sha256(key, canonical_json(params).as_bytes()))
    )
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use hmac::Mac;
    // HMAC takes a key of any length.
    let Ok(mut mac) = hmac::Hmac::<Sha256>::new_from_slice(key) else {
        unreachable!("HMAC takes a key of any length")
    };
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// A params key as the API and a delivery carry it: base64url, unpadded.
pub fn encode_params_key(key: &[u8; 32]) -> String {
    URL_SAFE_NO_PAD.encode(key)
}

/// A params key from its base64url form; `None` unless it is 32 bytes.
pub fn decode_params_key(text: &str) -> Option<[u8; 32]> {
    URL_SAFE_NO_PAD.decode(text.trim()).ok()?.try_into().ok()
}

/// Why a receipt or a key was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    /// The key is not an Ed25519 key in the expected form.
    #[error("not an Ed25519 receipt key: {0}")]
    Key(String),
    /// The receipt is malformed, signed by another key, or altered.
    #[error("receipt does not verify: {0}")]
    Invalid(String),
    /// Signing failed.
    #[error("cannot sign the receipt: {0}")]
    Sign(String),
}

/// The daemon's receipt signing key.
#[derive(Clone)]
pub struct ReceiptSigner {
    encoding: EncodingKey,
    public: [u8; 32],
    kid: String,
    seed: [u8; 32],
}

impl std::fmt::Debug for ReceiptSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReceiptSigner({})", self.kid)
    }
}

impl ReceiptSigner {
    /// The signer of a 32-byte Ed25519 seed.
    pub fn from_seed(seed: &[u8; 32]) -> Result<ReceiptSigner, ReceiptError> {
        let key = ed25519_dalek::SigningKey::from_bytes(seed);
        let der = key
            .to_pkcs8_der()
            .map_err(|e| ReceiptError::Key(e.to_string()))?;
        let public = key.verifying_key().to_bytes();
        Ok(ReceiptSigner {
            encoding: EncodingKey::from_ed_der(der.as_bytes()),
            public,
            kid: key_id(&public),
            seed: *seed,
        })
    }

    /// The key of action `action_id`'s params digest: HMAC-SHA256 of the
    /// id under the signing seed, so every daemon sharing the receipt key
    /// derives the same one and none needs storing. Knowing it tells
    /// nothing of the seed or of another action's key.
    pub fn params_key(&self, action_id: &str) -> [u8; 32] {
        let message = format!("actiongate receipt params key v2\n{action_id}");
        hmac_sha256(&self.seed, message.as_bytes())
    }

    /// The signer of a seed given as 64 hex digits.
    pub fn from_hex(seed: &str) -> Result<ReceiptSigner, ReceiptError> {
        let bytes = hex::decode(seed.trim()).map_err(|_| ReceiptError::Key("not hex".into()))?;
        let seed: [u8; 32] = bytes
            .try_into()
            .map_err(|_| ReceiptError::Key("not 32 bytes".into()))?;
        ReceiptSigner::from_seed(&seed)
    }

    /// The key's id: the first 16 hex digits of the SHA-256 of the public key.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public key as a JWK (`kty` `OKP`, `crv` `Ed25519`).
    pub fn jwk(&self) -> Value {
        serde_json::json!({
            "kty": "OKP",
            "crv": "Ed25519",
            "x": URL_SAFE_NO_PAD.encode(self.public),
            "kid": self.kid,
            "alg": "EdDSA",
            "use": "sig",
        })
    }

    /// The receipt of `claims`: a JWS in compact form.
    pub fn sign(&self, claims: &ReceiptClaims) -> Result<String, ReceiptError> {
        let mut header = Header::new(Algorithm::EdDSA);
        header.typ = Some(RECEIPT_TYP.to_owned());
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding)
            .map_err(|e| ReceiptError::Sign(e.to_string()))
    }
}

fn key_id(public: &[u8; 32]) -> String {
    hex::encode(&Sha256::digest(public)[..8])
}

/// A public key that checks receipts.
#[derive(Clone)]
pub struct ReceiptVerifier {
    decoding: DecodingKey,
    kid: String,
}

impl std::fmt::Debug for ReceiptVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReceiptVerifier({})", self.kid)
    }
}

impl ReceiptVerifier {
    /// The verifier of a JWK as [`ReceiptSigner::jwk`] gives it.
    pub fn from_jwk(jwk: &Value) -> Result<ReceiptVerifier, ReceiptError> {
        let field = |k: &str| jwk.get(k).and_then(Value::as_str);
        if field("kty") != Some("OKP") || field("crv") != Some("Ed25519") {
            return Err(ReceiptError::Key("kty must be OKP and crv Ed25519".into()));
        }
        let x = field("x").ok_or_else(|| ReceiptError::Key("no x".into()))?;
        let public: [u8; 32] = URL_SAFE_NO_PAD
            .decode(x)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| ReceiptError::Key("x is not 32 bytes of base64url".into()))?;
        Ok(ReceiptVerifier {
            decoding: DecodingKey::from_ed_components(x)
                .map_err(|e| ReceiptError::Key(e.to_string()))?,
            kid: key_id(&public),
        })
    }

    /// The claims of `receipt` if this key signed exactly it.
    pub fn verify(&self, receipt: &str) -> Result<ReceiptClaims, ReceiptError> {
        let receipt = receipt.trim();
        let header = jsonwebtoken::decode_header(receipt)
            .map_err(|e| ReceiptError::Invalid(e.to_string()))?;
        if header.alg != Algorithm::EdDSA {
            return Err(ReceiptError::Invalid("alg is not EdDSA".into()));
        }
        if header.typ.as_deref() != Some(RECEIPT_TYP) {
            return Err(ReceiptError::Invalid(format!("typ is not {RECEIPT_TYP}")));
        }
        if header.kid.as_deref().is_some_and(|k| k != self.kid) {
            return Err(ReceiptError::Invalid(format!(
                "signed by key {}, not by {}",
                header.kid.unwrap_or_default(),
                self.kid
            )));
        }
        let mut v = Validation::new(Algorithm::EdDSA);
        v.required_spec_claims = HashSet::new();
        v.validate_exp = false;
        v.validate_nbf = false;
        v.validate_aud = false;
        v.set_issuer(&["actiongate"]);
        let data = jsonwebtoken::decode::<ReceiptClaims>(receipt, &self.decoding, &v)
            .map_err(|e| ReceiptError::Invalid(e.to_string()))?;
        // A later version may mean its claims otherwise: not read as this one.
        // (Version 1, whose params digest is a plain one, is still read.)
        if !(1..=RECEIPT_VERSION).contains(&data.claims.v) {
            return Err(ReceiptError::Invalid(format!(
                "receipt version {}, this reader knows 1-{RECEIPT_VERSION}",
                data.claims.v
            )));
        }
        Ok(data.claims)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn claims() -> ReceiptClaims {
        ReceiptClaims {
            v: RECEIPT_VERSION,
            iss: "actiongate".into(),
            action_id: "0190".into(),
            agent: "a1".into(),
            action_string: "tool:bash:ls".into(),
            handler: None,
            action: None,
            params_digest: None,
            outcome: "allowed".into(),
            decided_by: Some("key:k1".into()),
            deciders: deciders_of(Some("key:k1")),
            decided_at: Some("2026-11-28T10:00:00Z".into()),
            iat: 1,
        }
    }

    #[test]
    fn a_signed_receipt_verifies_and_an_altered_one_does_not() {
        let s = ReceiptSigner::from_seed(&[7; 32]).unwrap();
        let v = ReceiptVerifier::from_jwk(&s.jwk()).unwrap();
        let r = s.sign(&claims()).unwrap();
        assert_eq!(v.verify(&r).unwrap(), claims());
        let mut bytes = r.clone().into_bytes();
        for i in 0..bytes.len() {
            if bytes[i] == b'.' {
                continue;
            }
            let orig = bytes[i];
            bytes[i] = if orig == b'A' { b'B' } else { b'A' };
            let changed = String::from_utf8(bytes.clone()).unwrap();
            assert!(
                v.verify(&changed).is_err(),
                "byte {i} changed still verifies"
            );
            bytes[i] = orig;
        }
    }

    #[test]
    fn another_key_refuses_it() {
        let s = ReceiptSigner::from_seed(&[7; 32]).unwrap();
        let other = ReceiptSigner::from_seed(&[8; 32]).unwrap();
        let r = s.sign(&claims()).unwrap();
        assert!(
            ReceiptVerifier::from_jwk(&other.jwk())
                .unwrap()
                .verify(&r)
                .is_err()
        );
    }

    /// Signed by the right key but of another type or a later version: not
    /// read as a receipt of this one.
    #[test]
    fn another_type_or_version_is_refused() {
        let s = ReceiptSigner::from_seed(&[7; 32]).unwrap();
        let v = ReceiptVerifier::from_jwk(&s.jwk()).unwrap();
        let mut header = Header::new(Algorithm::EdDSA);
        header.typ = Some("JWT".to_owned());
        let other = jsonwebtoken::encode(&header, &claims(), &s.encoding).unwrap();
        assert!(v.verify(&other).unwrap_err().to_string().contains("typ"));
        let later = ReceiptClaims {
            v: RECEIPT_VERSION + 1,
            ..claims()
        };
        let e = v.verify(&s.sign(&later).unwrap()).unwrap_err();
        assert!(e.to_string().contains("version"), "{e}");
    }

    #[test]
    fn signing_is_deterministic() {
        let s = ReceiptSigner::from_seed(&[7; 32]).unwrap();
        assert_eq!(s.sign(&claims()).unwrap(), s.sign(&claims()).unwrap());
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let a: Value =
            serde_json::from_str(r#"{"b":1,"a":{"z":[1,{"y":2,"x":3}],"c":"é"}}"#).unwrap();
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":"é","z":[1,{"x":3,"y":2}]},"b":1}"#
        );
        let b: Value =
            serde_json::from_str(r#"{"a":{"z":[1,{"x":3,"y":2}],"c":"é"},"b":1}"#).unwrap();
        assert_eq!(params_digest(&a, b"k"), params_digest(&b, b"k"));
    }

    #[test]
    fn params_are_bound_under_a_key_of_their_action() {
        let s = ReceiptSigner::from_seed(&[7; 32]).unwrap();
        let key = s.params_key("0190");
        // The same as any HMAC-SHA256 library gives (here Python's).
        assert_eq!(
            encode_params_key(&key),
            "homgyDaXdmFFKGf7fAxD-4SbJmveRMudv2Y2iUNJc10"
        );
        assert_eq!(
            params_digest(&serde_json::json!({"pin": "9305"}), &key),
            "hmac-sha256:a1a6d3aa939c468da4f4c79e7de19fceb06ff0fed9e01513b4161810818af5da"
        );
        assert_eq!(decode_params_key(&encode_params_key(&key)), Some(key));
        assert_eq!(decode_params_key("c2hvcnQ"), None);
        // Another action, another seed: another key.
        assert_ne!(s.params_key("0191"), key);
        let other = ReceiptSigner::from_seed(&[8; 32]).unwrap();
        assert_ne!(other.params_key("0190"), key);
    }

    #[test]
    fn only_humans_are_deciders() {
        for who in [None, Some("policy"), Some("deadline"), Some("grant:g1")] {
            assert!(deciders_of(who).is_empty(), "{who:?}");
        }
        assert_eq!(deciders_of(Some("telegram:42"))[0].via, "telegram");
        assert_eq!(deciders_of(Some("key:k1"))[0].via, "api");
        assert_eq!(deciders_of(Some("local"))[0].via, "local");
    }
}
