//! `AppState`: what every request handler and background task shares.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actiongate_policy::{Profile, ProfileSpec};
use actiongate_store::{HandlerSecrets, Store, StoreError};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::auth::{Caller, KeyGuard};
use crate::cache::{Cache, KEY_TTL};
use crate::config::{Dispatch, Settings};
use crate::dispatcher::Dispatcher;
use crate::error::ApiError;
use crate::handler_spec::CompiledHandler;
use crate::metrics::Metrics;
use crate::sse::Hub;
use crate::waiters::Waiters;

/// Compiled profiles stay cached by their JSON text; more distinct profiles
/// than this clear the cache (they recompile on next use).
const PROFILE_CACHE_MAX: usize = 1024;

/// How long a handler's registration and secrets are used without reading
/// them again. Changes through the API take effect at once (they invalidate
/// the cache); this bounds how long a change made behind the daemon's back
/// goes unseen.
const HANDLER_TTL: Duration = Duration::from_secs(5);

/// Shared state, cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    store: Store,
    settings: Settings,
    tz: chrono_tz::Tz,
    min_timeout: Duration,
    max_timeout: Duration,
    default_timeout: Duration,
    default_profile: Arc<Profile>,
    profiles: Mutex<HashMap<String, Arc<Profile>>>,
    /// Handlers by id, as looked up (see [`HANDLER_TTL`]).
    handlers: Cache<Arc<CompiledHandler>>,
    /// Compiled handlers by id, reused while their record is unchanged.
    compiled: Mutex<HashMap<String, Arc<CompiledHandler>>>,
    secrets: Cache<Arc<HandlerSecrets>>,
    dispatch: Dispatch,
    dispatcher: Dispatcher,
    agent_profiles: Cache<Arc<Profile>>,
    keys: Cache<Caller>,
    /// Bumped when a key is revoked through the API (see [`KeyGuard`]).
    revocations: watch::Sender<u64>,
    waiters: Waiters,
    hub: Hub,
    deadlines_changed: Notify,
    metrics: Metrics,
    shutdown: CancellationToken,
}

impl AppState {
    /// Builds the state; settings must already be validated.
    pub fn new(
        store: Store,
        settings: Settings,
        metrics: Metrics,
        shutdown: CancellationToken,
    ) -> anyhow::Result<AppState> {
        let tz = settings.time_zone()?;
        let (min_timeout, max_timeout, default_timeout) = settings.timeouts()?;
        let default_profile = Arc::new(settings.default_profile()?);
        let dispatch = settings.dispatch.parsed()?;
        let dispatcher = Dispatcher::new(dispatch.clone())?;
        Ok(AppState(Arc::new(Inner {
            waiters: Waiters::new(store.clone(), shutdown.clone()),
            hub: Hub::new(
                &store,
                settings.events.buffer,
                settings.events.coalesce()?,
                shutdown.clone(),
            ),
            store,
            settings,
            tz,
            min_timeout,
            max_timeout,
            default_timeout,
            default_profile,
            profiles: Mutex::new(HashMap::new()),
            handlers: Cache::new(Some(HANDLER_TTL)),
            compiled: Mutex::new(HashMap::new()),
            secrets: Cache::new(Some(HANDLER_TTL)),
            dispatch,
            dispatcher,
            agent_profiles: Cache::new(None),
            keys: Cache::new(Some(KEY_TTL)),
            revocations: watch::Sender::new(0),
            deadlines_changed: Notify::new(),
            metrics,
            shutdown,
        })))
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.0.store
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.0.settings
    }

    /// The dispatch settings, parsed.
    pub fn dispatch(&self) -> &Dispatch {
        &self.0.dispatch
    }

    /// Dispatch limits and client, shared by the dispatch loop and the
    /// requests that start attempts themselves.
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.0.dispatcher
    }

    /// Time zone for `today`.
    pub fn tz(&self) -> chrono_tz::Tz {
        self.0.tz
    }

    /// `(min, max, default)` of a pending action's time to decide.
    pub fn timeouts(&self) -> (Duration, Duration, Duration) {
        (
            self.0.min_timeout,
            self.0.max_timeout,
            self.0.default_timeout,
        )
    }

    /// Long-poll waiters.
    pub fn waiters(&self) -> &Waiters {
        &self.0.waiters
    }

    /// The event hub that feeds event streams.
    pub fn events_hub(&self) -> &Hub {
        &self.0.hub
    }

    /// Wakes the expiry sweeper when a new deadline may be earlier.
    pub fn deadlines_changed(&self) -> &Notify {
        &self.0.deadlines_changed
    }

    /// Metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }

    /// Cancelled when the daemon shuts down.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.0.shutdown
    }

    /// Valid keys by the hash of their secret (see [`crate::cache`]).
    pub fn keys(&self) -> &Cache<Caller> {
        &self.0.keys
    }

    /// Forgets the cached profile of `agent` after it changed.
    pub fn forget_agent(&self, agent: &str) {
        self.0.agent_profiles.invalidate(|id, _| id == agent);
    }

    /// Forgets key `key_id` after it was revoked, and tells the streams it
    /// holds open.
    pub fn forget_key(&self, key_id: &str) {
        self.0.keys.invalidate(|_, caller| caller.key_id == key_id);
        self.0.revocations.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// What ends a stream of `caller`'s once its key is revoked.
    pub fn key_guard(&self, caller: &Caller) -> KeyGuard {
        KeyGuard::new(
            self.0.store.clone(),
            caller.key_id.clone(),
            self.0.revocations.subscribe(),
        )
    }

    /// The compiled profile of `agent`: its own, or the configured default.
    pub async fn profile_of(&self, agent: &str) -> Result<Arc<Profile>, ApiError> {
        match self.0.agent_profiles.get(agent) {
            Ok(profile) => Ok(profile),
            Err(ticket) => {
                let profile = self.load_profile(agent).await?;
                self.0.agent_profiles.insert(ticket, agent, profile.clone());
                Ok(profile)
            }
        }
    }

    async fn load_profile(&self, agent: &str) -> Result<Arc<Profile>, ApiError> {
        let Some(record) = self.0.store.get_agent(agent).await? else {
            return Ok(self.0.default_profile.clone());
        };
        let Some(json) = record.profile else {
            return Ok(self.0.default_profile.clone());
        };
        let text = json.to_string();
        if let Some(p) = self
            .0
            .profiles
            .lock()
            .map_err(|_| ApiError::internal())?
            .get(&text)
        {
            return Ok(p.clone());
        }
        // Stored profiles were validated when set; failing here means the row
        // was edited by hand, and an unusable profile must not allow anything.
        let profile = serde_json::from_value::<ProfileSpec>(json)
            .map_err(|e| e.to_string())
            .and_then(|spec| Profile::from_spec(spec).map_err(|e| e.to_string()))
            .map_err(|e| {
                tracing::error!(agent, error = %e, "stored profile does not compile");
                ApiError::internal()
            })?;
        let profile = Arc::new(profile);
        let mut cache = self.0.profiles.lock().map_err(|_| ApiError::internal())?;
        if cache.len() >= PROFILE_CACHE_MAX {
            cache.clear();
        }
        cache.insert(text, profile.clone());
        Ok(profile)
    }

    /// Forgets what is cached of handler `id` after it changed.
    pub fn forget_handler(&self, id: &str) {
        self.0.handlers.invalidate(|k, _| k == id);
        self.0.secrets.invalidate(|k, _| k == id);
    }

    /// A handler compiled for use (retired ones too; callers check), cached
    /// until its registration changes.
    pub async fn handler(&self, id: &str) -> Result<Arc<CompiledHandler>, ApiError> {
        let ticket = match self.0.handlers.get(id) {
            Ok(h) => return Ok(h),
            Err(ticket) => ticket,
        };
        let record = match self.0.store.get_handler(id).await {
            Ok(r) => r,
            Err(StoreError::NotFound) => {
                return Err(ApiError::not_found(format!("no handler '{id}'")));
            }
            Err(e) => return Err(e.into()),
        };
        let reuse = self
            .0
            .compiled
            .lock()
            .map_err(|_| ApiError::internal())?
            .get(id)
            .filter(|h| h.record == record)
            .cloned();
        let compiled = match reuse {
            Some(h) => h,
            None => {
                let h = Arc::new(CompiledHandler::compile(record)?);
                self.0
                    .compiled
                    .lock()
                    .map_err(|_| ApiError::internal())?
                    .insert(id.to_owned(), h.clone());
                h
            }
        };
        self.0.handlers.insert(ticket, id, compiled.clone());
        Ok(compiled)
    }

    /// Handler `id`'s secrets valid now (the current one first), cached
    /// like [`AppState::handler`].
    pub async fn handler_secrets(&self, id: &str) -> Result<Vec<String>, StoreError> {
        let now = chrono::Utc::now();
        let secrets = match self.0.secrets.get(id) {
            Ok(s) => s,
            Err(ticket) => {
                let s = Arc::new(self.0.store.handler_secret_set(id).await?);
                self.0.secrets.insert(ticket, id, s.clone());
                s
            }
        };
        Ok(secrets.valid_at(now))
    }
}
