//! Building the router and running the daemon: store, first admin key,
//! background tasks, HTTP server, graceful shutdown.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, Request};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use actiongate_gate::storage::{self, AuditKey, Store, StoreOptions};
use actiongate_gate::{Gate, Role};

use crate::auth::issue_key;
use crate::config::Settings;
use crate::error::ApiError;
use crate::metrics::{Metrics, Track};
use crate::sse::Hub;
use crate::state::AppState;
use crate::transport::HttpTransport;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The full HTTP application for `state`.
pub fn router(state: AppState) -> Router {
    let body_limit = state.settings().http.body_limit_bytes;
    let mut routes = crate::routes::router()
        .merge(crate::web::router())
        .merge(crate::openapi::router())
        .merge(crate::mcp::router(&state));
    if let Some(c) = state.connectors() {
        routes = routes.merge(crate::connectors::routes::router(c.clone()));
    }
    // One stack, so that a request clones one boxed service per route
    // instead of one per layer. The first layer is the outermost.
    let stack = tower::ServiceBuilder::new()
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
                let id = req
                    .headers()
                    .get(&REQUEST_ID)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
            }),
        )
        .layer(CatchPanicLayer::custom(|_: Box<dyn std::any::Any + Send>| -> Response {
            tracing::error!("a request handler panicked");
            ApiError::internal().into_response()
        }))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(Track)
        .layer(crate::in_flight::InFlightLayer::new(state.clone()));
    routes
        .fallback(|| async { ApiError::not_found("no such endpoint") })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .layer(stack)
        .with_state(state)
}

/// Opens the store of `settings` (creating the data dir), applying
/// migrations: the SQLite file in the data dir, or the Postgres database of
/// `storage.database_url`.
pub async fn open_store(settings: &Settings) -> anyhow::Result<Store> {
    open_store_upgrading(settings, true).await
}

/// [`open_store`]; unless `upgrade`, an existing database of an earlier
/// version is refused rather than migrated.
async fn open_store_upgrading(settings: &Settings, upgrade: bool) -> anyhow::Result<Store> {
    create_data_dir(&settings.data_dir)?;
    let opts = StoreOptions {
        upgrade,
        durability: settings.storage.durability,
        batch_max: settings.storage.batch_max,
        commit_delay: settings.storage.commit_delay()?,
        read_connections: settings.storage.read_connections,
        writer_cpu: settings.storage.writer_cpu,
        max_page_count: settings.storage.test_max_page_count,
        audit_key: Some(
            AuditKey::load_or_create(&settings.audit_key_path())
                .map_err(|e| anyhow::anyhow!("audit key: {e}"))?,
        ),
        default_profile: Some(std::sync::Arc::new(settings.default_profile()?)),
        ..StoreOptions::default()
    };
    let target = settings.storage_target();
    warn_if_others_read(&settings.data_dir, "the data dir", "700");
    warn_if_others_read(
        &settings.data_dir.join("admin.key"),
        "the admin key file",
        "600",
    );
    warn_if_others_read(&settings.audit_key_path(), "the audit key file", "600");
    match &target {
        storage::Target::Sqlite(path) => warn_if_others_read(path, "the database", "600"),
        storage::Target::Postgres(_) => {
            tracing::info!(database = %settings.database_shown(), "storage on Postgres");
        }
    }
    storage::open(&target, opts).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot open database {}: {}",
            settings.database_shown(),
            e.detail
        )
    })
}

/// The gate over the store of `settings`, for the commands that work on
/// it without serving (`keys`, `audit export`): no loops, nothing sent.
pub async fn open_offline(settings: &Settings) -> anyhow::Result<Gate> {
    let store = open_store_upgrading(settings, false).await?;
    Ok(Gate::offline(store, settings.gate_config()?))
}

/// Takes the lock that makes a daemon the only one serving the SQLite
/// database at `path` (`<path>.lock`, an advisory lock on an open file,
/// let go when the process ends however it ends). A second daemon on the
/// same database would keep its own caches (profiles, grants, keys) that
/// the first one's changes never clear: it would go on allowing what the
/// first was told to ask. So it is refused. Several daemons share a
/// Postgres database instead (docs/several-daemons.md).
pub fn lock_database(path: &Path) -> anyhow::Result<std::fs::File> {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let lock_path = std::path::PathBuf::from(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", lock_path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(anyhow::anyhow!(
            "another actiongate serves the database {} already (it holds {}): stop it, or \
             give this one a --data-dir of its own; several daemons share a Postgres database \
             instead",
            path.display(),
            lock_path.display()
        )),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(anyhow::anyhow!("cannot lock {}: {e}", lock_path.display()))
        }
    }
}

/// Creates `dir` (and its parents) if missing, for its owner alone: it
/// holds the database and the admin key. An existing one is left as it is.
pub fn create_data_dir(dir: &Path) -> anyhow::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .map_err(|e| anyhow::anyhow!("cannot create data dir {}: {e}", dir.display()))
}

/// Warns when `what` at `path` (the data dir, the database, a key file)
/// exists and other users may read it (made by an older version, or by
/// hand): it holds webhook secrets or a key. `mode` is what to chmod it to.
fn warn_if_others_read(path: &Path, what: &str, mode: &str) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                path = %path.display(),
                mode = format!("{:o}", meta.permissions().mode() & 0o777),
                "{what} is open to other users and holds secrets; chmod {mode} it"
            );
        }
    }
}

/// When no admin key is active (the first start, also after keys for agents
/// were made with the CLI, or once every admin key was revoked) creates one,
/// prints it once on stderr and writes it to `<data-dir>/admin.key` with
/// mode 0600: a daemon nobody can administer is of no use.
pub async fn ensure_admin_key(store: &Store, data_dir: &Path) -> anyhow::Result<()> {
    if store.active_admin_keys().await? > 0 {
        return Ok(());
    }
    let issued = issue_key(Role::Admin, None, Some("first admin key".to_owned()));
    // Checked again where it is written: of daemons starting together on
    // one empty database, one mints the key.
    if store.create_first_admin_key(issued.record).await?.is_none() {
        return Ok(());
    }
    let path = data_dir.join("admin.key");
    // Not `eprintln!`, which panics when stderr fails (a full disk).
    crate::log_sink::write(&format!(
        "actiongate: no admin key was active; created one (shown once; also in {}):\n{}\n",
        path.display(),
        issued.secret
    ));
    if let Err(e) = write_secret_file(&path, &issued.secret) {
        crate::log_sink::line(&format!(
            "actiongate: could not write {}: {e}",
            path.display()
        ));
    }
    Ok(())
}

/// Writes `secret` to `path` readable by its owner alone, whole or not at
/// all: a temporary file beside it, synced, then renamed over it, so a full
/// disk leaves no empty or cut-short key file behind.
fn write_secret_file(path: &Path, secret: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // tempfile creates it with mode 0600.
    let mut tmp = tempfile::Builder::new()
        .prefix(".admin.key.")
        .tempfile_in(dir)?;
    writeln!(tmp, "{secret}")?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Opens everything and serves on `listener` until `shutdown` is cancelled,
/// then stops accepting, answers open long-polls, and closes the database.
pub async fn run(
    settings: Settings,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    // Before anything is opened.
    let open_files = crate::fd_limit::raise_open_files();
    // Held until this returns: the lock is let go when the file is closed.
    let _serving = match settings.storage_target() {
        storage::Target::Sqlite(path) => {
            create_data_dir(&settings.data_dir)?;
            Some(lock_database(&path)?)
        }
        storage::Target::Postgres(_) => None,
    };
    let store = open_store(&settings).await?;
    ensure_admin_key(&store, &settings.data_dir).await?;
    let metrics = Metrics::install()?;
    let grace = Duration::from_secs(settings.http.shutdown_grace_seconds);
    let config = settings.gate_config()?;
    let dispatch = Arc::new(HttpTransport::new(
        config.dispatch.per_handler_max_in_flight,
        None,
        config.outbound.clone(),
    )?);
    let notify = Arc::new(HttpTransport::new(
        config.notify.concurrency,
        Some(config.notify.timeout),
        config.outbound.clone(),
    )?);
    if let (Some(key), Some(every)) = (
        store.audit_key().cloned(),
        settings.events.audit_anchor_interval(),
    ) {
        store.start_anchors(key, every).await;
    }
    let gate = Gate::new(store, config, dispatch, notify, shutdown.clone());
    let hub = Hub::new(
        &gate.event_log(),
        settings.events.window(),
        settings.events.coalesce(),
        shutdown.clone(),
    );
    let mut loops = gate.spawn().await;
    let connectors = crate::connectors::Connectors::new(gate.clone(), &settings.connectors)?;
    if let Some(c) = &connectors {
        loops.extend(c.spawn());
    }
    let state = AppState::new(gate.clone(), settings, hub, metrics, connectors);

    let addr = listener.local_addr()?;
    tracing::info!(%addr, "actiongate listening");
    let app = router(state.clone());
    let max_connections =
        crate::fd_limit::max_connections(state.settings().http.max_connections, open_files);
    tracing::debug!(max_connections, open_files, "connections accepted at once");
    let listener = crate::stall::StallGuardListener::new(
        listener,
        state.settings().events.send_timeout.get(),
        max_connections,
    );
    // Each connection gets a clone of the built router (an `Arc`), never
    // one rebuilt from its routes (about 50 KiB per open connection, which
    // once dominated the memory of idle long-polls).
    let read = Duration::from_secs(state.settings().http.request_read_seconds);
    let serving = tokio::spawn(crate::serve::serve(listener, app, read, shutdown.clone()));
    shutdown.cancelled().await;
    match tokio::time::timeout(grace, serving).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "server task failed"),
        Err(_) => tracing::warn!("open requests outlived the shutdown grace period"),
    }
    for task in loops {
        let _ = task.await;
    }
    gate.close().await;
    tracing::info!("actiongate stopped");
    Ok(())
}

/// Cancels `token` on SIGINT or SIGTERM.
pub fn cancel_on_signals(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let term = std::future::pending::<()>();
        tokio::select! {
            _ = ctrl_c => {}
            _ = term => {}
        }
        tracing::info!("shutting down");
        token.cancel();
    });
}
