//! The executor's HTTP side: `POST` (any path) takes the daemon's signed
//! `action.execute` deliveries; `GET /healthz` answers `ok`.
//!
//! Connections and request reads are bounded ([`crate::http`]). Before a
//! body is read, the signature headers must be there and the timestamp
//! fresh (401 otherwise), and the body must fit the limit (413) and the
//! budget of bodies being read at once.
//! A delivery is verified (401 and nothing runs if forged or stale), parsed,
//! claimed in the delivery record, run, recorded, journaled and answered.
//! A redelivery of a finished id gets the stored first outcome (same status
//! and body; in async mode the final outcome, answered synchronously since it
//! is known); one still running in this process gets 503 + `Retry-After`
//! (202 in async mode); one an earlier process never finished gets a final
//! 422 `interrupted` and is not re-run. An async action still running at
//! shutdown is abandoned (only its shell is killed); its redelivery after the
//! restart is answered `interrupted` the same way.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::actions::{self, Ctx, Outcome};
use crate::callback::Callback;
use crate::dedupe::{Claim, Dedupe, Stored};
use crate::http::{BodyBudget, BodyError};
use crate::journal::{self, Entry, Journal};
use crate::paths::Root;
use crate::signing::Signer;

/// Largest delivery accepted.
const BODY_LIMIT: usize = 16 * 1024 * 1024;

/// Bytes of bodies read at once before their signature is checked: four
/// of the largest, far more of the daemon's usual few KiB.
const BODY_BUDGET: usize = 4 * BODY_LIMIT;

/// Default of [`Settings::max_connections`] (`--max-connections`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

/// Everything the executor needs to serve.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Directory actions are confined to.
    pub root: PathBuf,
    /// Directory of the delivery record (and by default the journal).
    pub state_dir: PathBuf,
    /// Journal file (default `<state_dir>/agent_actions.jsonl`).
    pub journal: Option<PathBuf>,
    /// The handler's `whsec_` secret.
    pub secret: String,
    /// The handler id deliveries must name.
    pub handler_id: String,
    /// Commands are killed after this long.
    pub command_timeout: Duration,
    /// Cap of each of a command's stdout and stderr.
    pub output_cap: usize,
    /// Cap of what `read_file` returns.
    pub read_cap: usize,
    /// `Some(daemon base URL)`: answer 202 and post results there.
    pub async_results: Option<String>,
    /// Seconds a finished delivery is remembered (see [`crate::dedupe`]).
    pub dedupe_retention_secs: i64,
    /// Run only deliveries whose signed receipt, checked with this key,
    /// says a human allowed exactly them ([`crate::receipts`]).
    pub require_human_receipt: Option<actiongate_receipt::ReceiptVerifier>,
    /// Oldest receipt accepted with `require_human_receipt`.
    pub receipt_max_age: Duration,
    /// Time to send a request's head, and as long again for its body.
    pub request_read: Duration,
    /// Most connections open at once.
    pub max_connections: usize,
}

/// Why the executor cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The root is missing or not a directory.
    #[error("--root {0}: {1}")]
    Root(PathBuf, io::Error),
    /// The state dir (or the journal) lies inside the root.
    #[error(
        "{0} is inside --root; keep the executor's state outside it so agents cannot rewrite it"
    )]
    StateInsideRoot(PathBuf),
    /// A state file cannot be opened.
    #[error("{0}: {1}")]
    State(PathBuf, io::Error),
    /// The secret is not usable.
    #[error(transparent)]
    Secret(#[from] crate::signing::BadSecret),
    /// The HTTP client for callbacks cannot be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// A ready executor.
#[derive(Clone)]
pub struct Executor {
    ctx: Arc<Ctx>,
    signer: Signer,
    dedupe: Arc<Dedupe>,
    journal: Arc<Journal>,
    handler_id: Arc<str>,
    callback: Option<Callback>,
    receipt_key: Option<Arc<actiongate_receipt::ReceiptVerifier>>,
    receipt_max_age: Duration,
    request_read: Duration,
    max_connections: usize,
    budget: BodyBudget,
}

impl Executor {
    /// Opens the root and the state files.
    pub fn open(s: &Settings) -> Result<Executor, StartError> {
        let root = Root::new(&s.root).map_err(|e| StartError::Root(s.root.clone(), e))?;
        let journal_path = s
            .journal
            .clone()
            .unwrap_or_else(|| s.state_dir.join("agent_actions.jsonl"));
        for p in [&s.state_dir, &journal_path] {
            if root.contains(p) {
                return Err(StartError::StateInsideRoot(p.clone()));
            }
        }
        let state = |p: &PathBuf| {
            let p = p.clone();
            move |e| StartError::State(p, e)
        };
        std::fs::create_dir_all(&s.state_dir).map_err(state(&s.state_dir))?;
        let dedupe =
            Dedupe::open(&s.state_dir, s.dedupe_retention_secs).map_err(state(&s.state_dir))?;
        let journal = Journal::open(&journal_path).map_err(state(&journal_path))?;
        let signer = Signer::new(&s.secret)?;
        let callback = match &s.async_results {
            Some(daemon) => Some(Callback::new(daemon, signer.clone())?),
            None => None,
        };
        Ok(Executor {
            ctx: Arc::new(Ctx {
                root,
                command_timeout: s.command_timeout,
                output_cap: s.output_cap,
                read_cap: s.read_cap,
            }),
            signer,
            dedupe: Arc::new(dedupe),
            journal: Arc::new(journal),
            handler_id: Arc::from(s.handler_id.as_str()),
            callback,
            receipt_key: s.require_human_receipt.clone().map(Arc::new),
            receipt_max_age: s.receipt_max_age,
            request_read: s.request_read,
            max_connections: s.max_connections,
            budget: BodyBudget::new(BODY_BUDGET, BODY_LIMIT),
        })
    }

    /// The router.
    pub fn router(self) -> Router {
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .fallback(deliver)
            .with_state(self)
    }

    /// Serves on `listener` until `shutdown` completes.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()> {
        let (read, max) = (self.request_read, self.max_connections);
        crate::http::serve(listener, self.router(), read, max, shutdown).await
    }
}

/// The daemon's delivery body.
#[derive(Debug, Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    action_id: String,
    handler: String,
    action: String,
    #[serde(default)]
    params: Value,
    #[serde(default)]
    agent: Value,
    #[serde(default = "one")]
    attempt: u32,
    #[serde(default)]
    deadline: Option<String>,
    #[serde(default)]
    receipt: Option<String>,
    /// The key of the receipt's params digest (base64url).
    #[serde(default)]
    params_key: Option<String>,
}

fn one() -> u32 {
    1
}

fn reply(code: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(body)).into_response()
}

fn retry_later(message: &str) -> Response {
    let mut r = reply(503, json!({"error": message}));
    r.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("5"));
    r
}

async fn deliver(State(ex): State<Executor>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let headers = parts.headers;
    if parts.method != Method::POST {
        return reply(405, json!({"error": "POST action.execute deliveries here"}));
    }
    // Refuse what cannot be a delivery before reading (and holding) its body.
    if let Err(e) = ex.signer.check_headers(&headers) {
        tracing::warn!(error = %e, "refused a delivery with bad signature headers or timestamp");
        return reply(
            401,
            json!({"error": format!("signature check failed: {e}")}),
        );
    }
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let (body, reserved) = match ex.budget.read_body(body, length, ex.request_read).await {
        Ok(read) => read,
        Err(BodyError::TooLarge) => {
            return reply(
                413,
                json!({"error": format!("the body exceeds {BODY_LIMIT} bytes")}),
            );
        }
        Err(BodyError::Late) => {
            return retry_later("the body did not arrive in time");
        }
        Err(BodyError::Broken) => {
            return reply(
                400,
                json!({"error": format!("the body could not be read whole (cut short, or over {BODY_LIMIT} bytes)")}),
            );
        }
    };
    if let Err(e) = ex.signer.verify(&body, &headers) {
        tracing::warn!(error = %e, "refused a delivery with a bad signature or timestamp");
        return reply(
            401,
            json!({"error": format!("signature check failed: {e}")}),
        );
    }
    drop(reserved);
    let webhook_id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let env: Envelope = match serde_json::from_slice(&body) {
        Ok(env) => env,
        Err(e) => {
            tracing::warn!(webhook_id = %webhook_id, error = %e, "refused a signed delivery that is not action.execute");
            return reply(
                422,
                json!({"error": format!("not an action.execute delivery: {e}"), "kind": "bad_delivery"}),
            );
        }
    };
    let mismatch = if env.kind != "action.execute" {
        Some(format!("unsupported delivery type '{}'", env.kind))
    } else if env.action_id != webhook_id {
        Some("webhook-id does not match action_id".to_owned())
    } else if env.handler != *ex.handler_id {
        Some(format!(
            "this executor is handler '{}', not '{}'",
            ex.handler_id, env.handler
        ))
    } else {
        None
    };
    if let Some(msg) = mismatch {
        let outcome = Outcome::failure(journal::Status::Error, "bad_delivery", msg, Value::Null);
        ex.log(&env, &outcome);
        return reply(outcome.code, outcome.body);
    }
    if let Some(key) = &ex.receipt_key {
        let delivered = crate::receipts::Delivered {
            action_id: &env.action_id,
            handler: &env.handler,
            action: &env.action,
            params: &env.params,
            receipt: env.receipt.as_deref(),
            params_key: env.params_key.as_deref(),
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        if let Err(why) = crate::receipts::check(key, &delivered, ex.receipt_max_age, now) {
            tracing::warn!(action_id = %env.action_id, reason = %why, "refused a delivery without a valid human receipt");
            let outcome =
                Outcome::failure(journal::Status::Error, "no_human_receipt", why, Value::Null);
            ex.log(&env, &outcome);
            return reply(outcome.code, outcome.body);
        }
    }

    // The rest runs in its own task: if the daemon hangs up (it crashed,
    // or its timeout fired), hyper drops this handler, and a delivery
    // cancelled between its claim and its outcome would stay `Running`
    // here forever, answering every redelivery 503. Run it to the end and
    // record the outcome for the redelivery instead.
    match tokio::spawn(claim_and_run(ex, env)).await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "a delivery's task failed");
            reply(500, json!({"error": "the delivery's task failed"}))
        }
    }
}

/// Claims a verified delivery's id and runs it, or answers a redelivery.
async fn claim_and_run(ex: Executor, env: Envelope) -> Response {
    let claim = {
        let (dedupe, id, action, attempt) = (
            ex.dedupe.clone(),
            env.action_id.clone(),
            env.action.clone(),
            env.attempt,
        );
        tokio::task::spawn_blocking(move || dedupe.claim(&id, &action, attempt)).await
    };
    let claim = match claim {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            tracing::error!(action_id = %env.action_id, error = %e, "cannot record a delivery");
            return retry_later("cannot record the delivery; nothing was run");
        }
        Err(e) => {
            tracing::error!(action_id = %env.action_id, error = %e, "delivery record task failed");
            return retry_later("cannot record the delivery; nothing was run");
        }
    };
    match claim {
        Claim::Done(stored) => {
            tracing::info!(action_id = %env.action_id, attempt = env.attempt, "redelivery: answering with the first outcome");
            reply(stored.code, stored.body)
        }
        Claim::Running if ex.callback.is_some() => {
            reply(202, json!({"accepted": true, "running": true}))
        }
        Claim::Running => retry_later("still running; retry later for its outcome"),
        Claim::Interrupted => {
            let outcome = actions::interrupted();
            ex.finish(&env, &outcome).await;
            reply(outcome.code, outcome.body)
        }
        Claim::New => {
            if let Some(cb) = ex.callback.clone() {
                let ex = ex.clone();
                let (id, attempt) = (env.action_id.clone(), env.attempt);
                tokio::spawn(async move {
                    let outcome = ex.execute(&env).await;
                    ex.finish(&env, &outcome).await;
                    cb.post(&id, attempt, &outcome).await;
                });
                reply(202, json!({"accepted": true}))
            } else {
                let outcome = ex.execute(&env).await;
                ex.finish(&env, &outcome).await;
                reply(outcome.code, outcome.body)
            }
        }
    }
}

impl Executor {
    async fn execute(&self, env: &Envelope) -> Outcome {
        if let Some(deadline) = &env.deadline
            && let Ok(d) = chrono::DateTime::parse_from_rfc3339(deadline)
            && d < chrono::Utc::now()
        {
            return Outcome::failure(
                journal::Status::Failed,
                "deadline_passed",
                format!("the action's deadline ({deadline}) has passed; not run"),
                Value::Null,
            );
        }
        actions::run(self.ctx.clone(), &env.action, env.params.clone()).await
    }

    async fn finish(&self, env: &Envelope, outcome: &Outcome) {
        let stored = Stored {
            code: outcome.code,
            body: outcome.body.clone(),
        };
        let (dedupe, id) = (self.dedupe.clone(), env.action_id.clone());
        match tokio::task::spawn_blocking(move || dedupe.finish(&id, &stored)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!(action_id = %env.action_id, error = %e, "cannot record an outcome; a redelivery after a restart will be answered 'interrupted'");
            }
            Err(e) => {
                tracing::error!(action_id = %env.action_id, error = %e, "outcome record task failed")
            }
        }
        self.log(env, outcome);
    }

    fn log(&self, env: &Envelope, outcome: &Outcome) {
        let (filepath, reason) = actions::journal_fields(&env.params);
        let agent = match &env.agent {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        };
        tracing::info!(action_id = %env.action_id, action = %env.action, status = ?outcome.status, details = %outcome.details, "action finished");
        self.journal.append(&Entry {
            timestamp: chrono::Utc::now().timestamp(),
            action_type: env.action.clone(),
            filepath,
            reason,
            status: outcome.status,
            details: outcome.details.clone(),
            action_id: env.action_id.clone(),
            attempt: env.attempt,
            agent,
        });
    }
}
