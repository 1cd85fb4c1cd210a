//! Standard Webhooks signatures (<https://www.standardwebhooks.com>) for
//! everything the gate sends: deliveries to executors and notification
//! webhooks, through the `standardwebhooks` crate.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;

/// Prefix of every signing secret.
pub const SECRET_PREFIX: &str = "whsec_";

/// Why a payload could not be signed.
#[derive(Debug, thiserror::Error)]
#[error("cannot sign with this secret: {0}")]
pub struct SignError(String);

/// A new secret with 256 random bits.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes))
}

/// The `webhook-signature` value for a message: one `v1,<sig>` per valid
/// secret, space-separated (several during a rotation).
pub fn sign(
    secrets: &[String],
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, SignError> {
    let mut sigs = Vec::with_capacity(secrets.len());
    for s in secrets {
        let wh =
            standardwebhooks::Webhook::new(s).map_err(|e| SignError(format!("bad secret: {e}")))?;
        sigs.push(
            wh.sign(msg_id, timestamp, body)
                .map_err(|e| SignError(e.to_string()))?,
        );
    }
    Ok(sigs.join(" "))
}

/// How far a signed timestamp may be from now (Standard Webhooks': 5 minutes).
const TOLERANCE_SECS: u64 = 5 * 60;

/// Checks `signature` (a `webhook-signature` header) over a message with
/// any of `secrets`, with the Standard Webhooks tolerance on `timestamp`.
pub fn verify(
    secrets: &[String],
    msg_id: &str,
    timestamp: &str,
    signature: &str,
    body: &[u8],
) -> bool {
    // The window is checked here first: the library computes `now - ts`
    // unchecked, which overflows (a panic in debug builds, a wrap-around
    // that reads as fresh in release) for a timestamp near i64::MIN.
    let Ok(ts) = timestamp.trim().parse::<i64>() else {
        return false;
    };
    if chrono::Utc::now().timestamp().abs_diff(ts) > TOLERANCE_SECS {
        return false;
    }
    let mut headers = http::HeaderMap::new();
    let (Ok(id), Ok(ts), Ok(sig)) = (
        http::HeaderValue::from_str(msg_id),
        http::HeaderValue::from_str(timestamp),
        http::HeaderValue::from_str(signature),
    ) else {
        return false;
    };
    headers.insert("webhook-id", id);
    headers.insert("webhook-timestamp", ts);
    headers.insert("webhook-signature", sig);
    secrets.iter().any(|s| {
        standardwebhooks::Webhook::new(s).is_ok_and(|wh| wh.verify(body, &headers).is_ok())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The example of the Standard Webhooks reference libraries.
    #[test]
    fn signs_like_the_reference_implementation() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned();
        let sig = sign(
            &[secret],
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        )
        .unwrap();
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn a_signature_verifies_and_a_changed_body_does_not() {
        let secret = new_secret();
        let now = chrono::Utc::now().timestamp();
        let sig = sign(std::slice::from_ref(&secret), "msg_1", now, b"{}").unwrap();
        let ts = now.to_string();
        assert!(verify(
            std::slice::from_ref(&secret),
            "msg_1",
            &ts,
            &sig,
            b"{}"
        ));
        assert!(!verify(&[secret], "msg_1", &ts, &sig, b"{ }"));
    }
}
