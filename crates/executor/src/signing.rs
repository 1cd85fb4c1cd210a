//! Standard Webhooks signatures: verifying the daemon's deliveries and
//! signing the executor's async results, with the handler's `whsec_` secret.

use std::fmt;
use std::sync::Arc;

use axum::http::HeaderMap;
use standardwebhooks::Webhook;

/// The handler's secret, ready to verify and sign.
#[derive(Clone)]
pub struct Signer {
    hook: Arc<Webhook>,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Signer(..)")
    }
}

/// A secret that is not `whsec_` followed by base64.
#[derive(Debug, thiserror::Error)]
#[error("the webhook secret is not valid (expected whsec_ and base64): {0}")]
pub struct BadSecret(String);

impl Signer {
    /// Parses a `whsec_…` secret.
    pub fn new(secret: &str) -> Result<Signer, BadSecret> {
        let secret = secret.trim();
        if secret.is_empty() {
            return Err(BadSecret("empty".into()));
        }
        let hook = Webhook::new(secret).map_err(|e| BadSecret(e.to_string()))?;
        Ok(Signer {
            hook: Arc::new(hook),
        })
    }

    /// Verifies a delivery: `webhook-id`, `webhook-timestamp` within five
    /// minutes of now, and any one of the (space-separated) `v1` signatures.
    pub fn verify(&self, body: &[u8], headers: &HeaderMap) -> Result<(), String> {
        // The window first: the library computes `now - ts` unchecked,
        // which overflows for a timestamp near i64::MIN (a panic in debug
        // builds, a wrap-around that reads as fresh in release).
        self.check_headers(headers)?;
        self.hook.verify(body, headers).map_err(|e| e.to_string())
    }

    /// What can be checked before the body is read: a `webhook-id`, a `v1`
    /// signature and a `webhook-timestamp` within five minutes of now.
    pub fn check_headers(&self, headers: &HeaderMap) -> Result<(), String> {
        let text = |name| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        text("webhook-id").ok_or("missing webhook-id")?;
        text("webhook-signature")
            .filter(|v| v.split(' ').any(|s| s.starts_with("v1,")))
            .ok_or("missing or invalid webhook-signature")?;
        let ts = headers
            .get("webhook-timestamp")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<i64>().ok())
            .ok_or("missing or invalid webhook-timestamp")?;
        if chrono::Utc::now().timestamp().abs_diff(ts) > 5 * 60 {
            return Err("webhook-timestamp is not within five minutes of now".to_owned());
        }
        Ok(())
    }

    /// The three Standard Webhooks headers for sending `body` as `id` now.
    pub fn headers(&self, id: &str, body: &[u8]) -> Result<[(&'static str, String); 3], String> {
        let ts = chrono::Utc::now().timestamp();
        let sig = self.hook.sign(id, ts, body).map_err(|e| e.to_string())?;
        Ok([
            ("webhook-id", id.to_owned()),
            ("webhook-timestamp", ts.to_string()),
            ("webhook-signature", sig),
        ])
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

    fn header_map(h: &[(&'static str, String)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in h {
            m.insert(*k, v.parse().unwrap());
        }
        m
    }

    #[test]
    fn what_it_signs_it_verifies_and_a_changed_body_fails() {
        let s = Signer::new(SECRET).unwrap();
        let h = header_map(&s.headers("act_1", b"{}").unwrap());
        s.verify(b"{}", &h).unwrap();
        assert!(s.verify(b"{ }", &h).is_err());
    }

    #[test]
    fn any_one_of_several_signatures_suffices() {
        let s = Signer::new(SECRET).unwrap();
        let other = Signer::new("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").unwrap();
        let mut h = s.headers("act_1", b"{}").unwrap();
        let theirs = other.headers("act_1", b"{}").unwrap();
        h[2].1 = format!("{} {}", theirs[2].1, h[2].1);
        s.verify(b"{}", &header_map(&h)).unwrap();
        assert!(
            other
                .verify(b"{}", &header_map(&s.headers("x", b"{}").unwrap()))
                .is_err()
        );
    }

    #[test]
    fn timestamps_at_the_ends_of_i64_are_stale_not_a_panic() {
        let s = Signer::new(SECRET).unwrap();
        for ts in [i64::MIN, i64::MIN + 1, i64::MAX] {
            let sig = s.hook.sign("act_1", ts, b"{}").unwrap();
            let h = header_map(&[
                ("webhook-id", "act_1".to_owned()),
                ("webhook-timestamp", ts.to_string()),
                ("webhook-signature", sig),
            ]);
            assert!(s.verify(b"{}", &h).is_err(), "{ts}");
        }
    }

    #[test]
    fn stale_timestamps_fail() {
        let s = Signer::new(SECRET).unwrap();
        let old = chrono::Utc::now().timestamp() - 600;
        let sig = s.hook.sign("act_1", old, b"{}").unwrap();
        let h = header_map(&[
            ("webhook-id", "act_1".into()),
            ("webhook-timestamp", old.to_string()),
            ("webhook-signature", sig),
        ]);
        assert!(s.verify(b"{}", &h).is_err());
    }

    #[test]
    fn bad_secrets_are_rejected() {
        assert!(Signer::new("").is_err());
        assert!(Signer::new("whsec_!!!").is_err());
    }
}
