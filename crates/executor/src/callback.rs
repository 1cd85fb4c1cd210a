//! Async results: after answering 202, the executor posts the outcome to
//! `{daemon}/v1/actions/{id}/result`, signed like the daemon's deliveries
//! (`webhook-id` = `res_<action id>_<attempt>`, a fresh timestamp; the
//! body names the action, which binds the result to it), and
//! retries with backoff on network errors, 5xx, 408 and 429.

use std::time::Duration;

use serde_json::{Value, json};

use crate::actions::Outcome;
use crate::signing::Signer;

/// Waits between the first tries of one callback; later ones wait
/// [`BACKOFF_MOST`].
const BACKOFF: [Duration; 6] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
    Duration::from_secs(15),
];

/// The longest wait between tries.
const BACKOFF_MOST: Duration = Duration::from_secs(30);

/// How long a result is tried for: a database fault of some minutes (a
/// held lock, a Postgres restart) must not cost the action its result
/// until the daemon's `dispatch.async_result_timeout` (an hour) sends it
/// again.
pub const RETRY_FOR: Duration = Duration::from_secs(15 * 60);

/// Most bytes of a callback body: the daemon's default body limit
/// (`http.body_limit_bytes`, 1 MiB) less room for the envelope. A larger
/// result is sent as `{"truncated": true, "size": …}`, which the daemon
/// would keep of it anyway, rather than be refused (413) for good.
pub const MAX_BODY: usize = 1024 * 1024 - 4096;

/// The waits before each try after the first, adding up to [`RETRY_FOR`].
pub fn waits() -> impl Iterator<Item = Duration> {
    let mut total = Duration::ZERO;
    BACKOFF
        .into_iter()
        .chain(std::iter::repeat(BACKOFF_MOST))
        .take_while(move |w| {
            total += *w;
            total <= RETRY_FOR
        })
}

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

/// The callback body as sent: [`body`], or past [`MAX_BODY`] the same with
/// its result replaced by a truncation note.
pub fn encoded(action_id: &str, outcome: &Outcome, attempt: u32) -> serde_json::Result<Vec<u8>> {
    let mut value = body(action_id, outcome, attempt);
    let payload = serde_json::to_vec(&value)?;
    if payload.len() <= MAX_BODY {
        return Ok(payload);
    }
    let size = serde_json::to_vec(&value["result"])?.len();
    value["result"] = json!({"truncated": true, "size": size});
    if let Some(error) = value.get_mut("error")
        && !error.is_null()
    {
        let text = error
            .as_str()
            .map_or_else(|| error.to_string(), str::to_owned);
        *error = json!(text.chars().take(4096).collect::<String>());
    }
    serde_json::to_vec(&value)
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

    /// Delivers one result; gives up after [`RETRY_FOR`].
    pub async fn post(&self, action_id: &str, attempt: u32, outcome: &Outcome) {
        let url = format!("{}/v1/actions/{action_id}/result", self.daemon);
        let payload = match encoded(action_id, outcome, attempt) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(action_id, error = %e, "cannot encode a result");
                return;
            }
        };
        let id = format!("res_{action_id}_{attempt}");
        for (n, wait) in std::iter::once(Duration::ZERO).chain(waits()).enumerate() {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_result_is_tried_for_minutes_not_seconds() {
        let total: Duration = waits().sum();
        assert!(total <= RETRY_FOR, "{total:?}");
        assert!(total + BACKOFF_MOST > RETRY_FOR, "{total:?}");
        assert!(waits().all(|w| w <= BACKOFF_MOST));
    }

    #[test]
    fn a_result_past_the_body_limit_is_sent_as_a_truncation_note() {
        let small = Outcome {
            code: 200,
            body: json!({"content": "x"}),
            status: crate::journal::Status::Success,
            details: String::new(),
        };
        let sent: Value = serde_json::from_slice(&encoded("a1", &small, 1).unwrap()).unwrap();
        assert_eq!(sent["result"], json!({"content": "x"}));
        let big = Outcome {
            code: 422,
            body: json!({"content": "x".repeat(2 * MAX_BODY), "error": "y".repeat(10_000)}),
            status: crate::journal::Status::Failed,
            details: String::new(),
        };
        let bytes = encoded("a1", &big, 1).unwrap();
        assert!(bytes.len() < 8192, "{}", bytes.len());
        let sent: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(sent["result"]["truncated"], true);
        assert!(sent["result"]["size"].as_u64().unwrap() > 2 * MAX_BODY as u64);
        assert_eq!(sent["error"].as_str().unwrap().len(), 4096);
        assert_eq!(sent["status"], "failed");
        assert_eq!(sent["action_id"], "a1");
    }
}
