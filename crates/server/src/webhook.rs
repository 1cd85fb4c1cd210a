//! Standard Webhooks signing (<https://www.standardwebhooks.com>): secrets
//! (`whsec_` + base64 of random bytes), and `webhook-signature: v1,<base64
//! HMAC-SHA256 of "{id}.{timestamp}.{body}">` keyed with the decoded secret.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

/// Prefix of every signing secret.
pub const SECRET_PREFIX: &str = "whsec_";

/// Why a payload could not be signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The secret is not `whsec_` followed by base64.
    #[error("the signing secret is not whsec_ followed by base64")]
    BadSecret,
}

/// A new secret with 256 random bits.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes))
}

/// The `webhook-signature` value for a message.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Result<String, SignError> {
    let key = secret
        .strip_prefix(SECRET_PREFIX)
        .and_then(|b64| STANDARD.decode(b64).ok())
        .filter(|k| !k.is_empty())
        .ok_or(SignError::BadSecret)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).map_err(|_| SignError::BadSecret)?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Ok(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// Installs rustls' ring provider as the process default (once; later
/// calls do nothing). reqwest's TLS needs it before a client is built.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks reference libraries.
    #[test]
    fn signs_like_the_reference_implementation() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let sig = sign(
            secret,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(
            sig.ok().as_deref(),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
    }

    #[test]
    fn rejects_a_secret_without_prefix() {
        assert!(sign("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "a", 1, b"").is_err());
    }
}
