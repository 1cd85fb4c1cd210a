//! Async results: after answering 202, the executor posts the outcome to
//! `{daemon}/v1/actions/{id}/result`, signed like the daemon's deliveries
//! (`webhook-id` = `res_<action id>_<attempt>`, a fresh timestamp; the
//! body names the action, which binds the result to it), and
//! retries with backoff on network errors, 5xx, 408 and 429.

use std::time::Duration;

use serde_json::{Value, json};

use crate::actions::Outcome;
use crate::signing::Signer;

/// Waits between tries of one callback.
const BACKOFF: [Duration; 5] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
];

/// Posts async results to the daemon.
#[derive(Debug, Clone)]
pub struct Callback {
    client: reqwest::Client,
    daemon: String,
    signer: Signer,
}

/// The callback body for an outcome of action `action_id`; naming the
/// action in the signed body binds the result to it.
pub fn body(action_id: &str, outcome: &Outcome, attempt: u32) -> Value {
    if outcome.code < 300 {
        json!({"status": "completed", "result": outcome.body, "attempt": attempt, "action_id": action_id})
    } else {
        json!({
            "status": "failed",
            "error": outcome.body.get("error").cloned().unwrap_or(Value::Null),
            "result": outcome.body,
            "attempt": attempt,
            "action_id": action_id,
        })
    }
}

impl Callback {
    /// Posts to `daemon` (its base URL) with `signer`.
    pub fn new(daemon: &str, signer: Signer) -> Result<Callback, reqwest::Error> {
        crate::install_tls_provider();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(Callback {
            client,
            daemon: daemon.trim_end_matches('/').to_owned(),
            signer,
        })
    }

    /// Delivers one result; gives up after the last backoff step.
    pub async fn post(&self, action_id: &str, attempt: u32, outcome: &Outcome) {
        let url = format!("{}/v1/actions/{action_id}/result", self.daemon);
        let payload = match serde_json::to_vec(&body(action_id, outcome, attempt)) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(action_id, error = %e, "cannot encode a result");
                return;
            }
        };
        let id = format!("res_{action_id}_{attempt}");
        for (n, wait) in std::iter::once(Duration::ZERO).chain(BACKOFF).enumerate() {
            tokio::time::sleep(wait).await;
            // A fresh timestamp (and so signature) on every try.
            let headers = match self.signer.headers(&id, &payload) {
                Ok(h) => h,
                Err(e) => {
                    tracing::error!(action_id, error = %e, "cannot sign a result");
                    return;
                }
            };
            let mut req = self
                .client
                .post(&url)
                .header("content-type", "application/json")
                .body(payload.clone());
            for (k, v) in headers {
                req = req.header(k, v);
            }
            match req.send().await {
                Ok(resp) => {
                    let code = resp.status().as_u16();
                    if resp.status().is_success() {
                        tracing::info!(action_id, attempt, "result delivered");
                        return;
                    }
                    let retry = code >= 500 || code == 408 || code == 429;
                    let text = resp.text().await.unwrap_or_default();
                    if !retry {
                        tracing::warn!(action_id, code, body = %text, "the daemon refused the result; not retrying");
                        return;
                    }
                    tracing::warn!(
                        action_id,
                        code,
                        try_ = n + 1,
                        "result not accepted yet; will retry"
                    );
                }
                Err(e) => {
                    tracing::warn!(action_id, error = %e, try_ = n + 1, "cannot reach the daemon with a result; will retry");
                }
            }
        }
        tracing::error!(
            action_id,
            attempt,
            "gave up delivering a result; a redelivery of the action will get it"
        );
    }
}
