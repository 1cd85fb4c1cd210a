//! The gate: the workflows every adapter shares, with no HTTP in them.
//!
//! An adapter (the HTTP API, SSE and long-poll, the CLI's offline commands,
//! MCP, chat connectors) turns its input into a call on [`Gate`] and the
//! answer (or a [`GateError`]) into its output. Deciding, grants, expiry,
//! dispatch and events live here and only here.
//!
//! Layout: [`caller`] turns keys into a [`Caller`]; [`policy`] runs the
//! policy for a caller; [`actions`] requests actions, [`decisions`] decides
//! on them (approve, approve and remember, deny, reply, cancel, outcome,
//! executor result); [`grants`] and [`grant_requests`] the standing
//! permissions; [`admin`] keys, agents and handlers; [`subscriptions`]
//! notification webhooks; [`events`] the event log adapters read;
//! [`waiters`] wakes long-polls; background loops ([`sweeper`],
//! [`dispatch`], [`notify`], [`retention`]) are started by [`Gate::spawn`]
//! and end on the gate's cancellation token. Outbound HTTP is the adapter's:
//! dispatch and notifications send through a [`Transport`].
//!
//! Invariants:
//! - no function here knows HTTP: inputs are typed, errors are
//!   [`ErrorCode`]s that an adapter maps one to one;
//! - every state change goes through the store's compare-and-set
//!   transitions, which also write its event in the same transaction;
//! - an error, timeout or limit hit while deciding is never an allow;
//! - a human decision records who made it ([`Caller::identity`]).

pub mod actions;
pub mod admin;
pub mod asked_rules;
pub mod audit;
pub mod bounds;
pub mod cache;
pub mod caller;
pub mod carried_taint;
mod caution;
pub mod connectors;
mod decided_again;
pub mod decisions;
pub mod dispatch;
pub mod error;
pub mod escalation;
pub mod events;
pub mod examples;
pub mod grant_requests;
pub mod grants;
mod handler_change;
pub mod handler_spec;
pub mod holds;
mod open_gauge;
pub use open_gauge::OpenGauge;
mod agent_window;
pub mod notify;
pub mod outbound;
pub mod paging;
mod pending_limit;
pub mod people;
pub mod plans;
pub mod policy;
pub mod quorum;
mod rate;
pub mod receipts;
pub mod replay;
mod request_key;
pub mod retention;
pub mod revocations;
mod run_limit;
pub mod scope_check;
pub mod scrub;
mod session_calls;
pub mod sessions;
pub mod sign;
pub mod storage;
pub mod subscriptions;
pub mod sweeper;
pub mod template;
pub mod tools;
pub mod transport;
pub mod waiters;
mod write_budget;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actiongate_policy::{Profile, ProfileSpec};
use actiongate_store::Store;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

pub use actiongate_store::{
    Action, ActionStatus, ApiKey, Decision, DecisionResult, Delivery, DeliveryStatus, Event,
    GrantFilter, GrantRecord, GrantRequest, GrantRequestStatus, HandlerRecord, Role, Subscription,
};
pub use caller::{Caller, KeyGuard};
pub use dispatch::DispatchConfig;
pub use error::{ErrorCode, GateError, GateResult};
pub use notify::NotifyConfig;
pub use paging::ListPage;
pub use transport::{OutboundError, OutboundRequest, OutboundResponse, Transport};

use crate::cache::{Cache, KEY_TTL};
use crate::dispatch::Dispatcher;
use crate::handler_spec::CompiledHandler;
use crate::waiters::Waiters;

/// Compiled profiles stay cached by their JSON text; more distinct profiles
/// than this clear the cache (they recompile on next use).
const PROFILE_CACHE_MAX: usize = 1024;

/// How long a handler's registration and secrets are used without reading
/// them again. Changes through the gate take effect at once (they
/// invalidate the cache); this bounds how long a change made behind the
/// daemon's back goes unseen.
const HANDLER_TTL: Duration = Duration::from_secs(5);

/// Longest between two prunes of executors' callback ids (`retention`).
const SEEN_PRUNE_EVERY: Duration = Duration::from_secs(600);

/// With several daemons on one database (Postgres), how long anything read
/// from it is used without reading it again: a change made through another
/// daemon (a profile, a handler, a revoked key) takes effect here within it.
const SHARED_TTL: Duration = Duration::from_secs(1);

/// Everything the gate is told at start, typed.
#[derive(Clone)]
pub struct GateConfig {
    /// Time zone in which `today` ends.
    pub tz: chrono_tz::Tz,
    /// Shortest time to decide a request may name.
    pub min_timeout: Duration,
    /// Longest time to decide a request may name.
    pub max_timeout: Duration,
    /// Time to decide when a request names none.
    pub default_timeout: Duration,
    /// Longest long-poll.
    pub max_wait: Duration,
    /// Profile of agents that have none.
    pub default_profile: Arc<Profile>,
    /// Dispatch to executors.
    pub dispatch: DispatchConfig,
    /// Whether dispatch runs at all.
    pub dispatch_enabled: bool,
    /// Outbound notification webhooks.
    pub notify: NotifyConfig,
    /// How long events are kept (`None`: forever).
    pub retention: Option<Duration>,
    /// How long settled records are kept (`None`: forever).
    pub records_retention: Option<Duration>,
    /// How long ended sessions that were tainted are kept (`None`: forever).
    pub tainted_session_retention: Option<Duration>,
    /// How often pruning runs.
    pub prune_interval: Duration,
    /// Size limits of free-form JSON (params, results, scopes).
    pub json: bounds::JsonLimits,
    /// Most items (actions and grant requests) one agent may have waiting
    /// for a human at once.
    pub max_pending_per_agent: usize,
    /// Most runs without a decision one agent may report a minute (each
    /// an `action.undecided` event) to this daemon.
    pub max_undecided_runs_per_minute: usize,
    /// Most bytes of requests (actions, plans) one agent may have this
    /// daemon store an hour.
    pub max_request_bytes_per_agent_per_hour: u64,
    /// Most event streams and long-polls one key holds open at once.
    pub max_open_per_key: usize,
    /// Most of one key's other requests being answered at once.
    pub max_in_flight_per_key: usize,
    /// Where handler and subscription URLs may point.
    pub outbound: outbound::OutboundPolicy,
    /// How long a session may stay idle before it ends (and its grants
    /// are revoked); a plan's grants last at most this long.
    pub session_idle: Duration,
}

/// The application core, cheap to clone.
#[derive(Clone)]
pub struct Gate(Arc<Inner>);

struct Inner {
    store: Store,
    config: GateConfig,
    /// Compiled stored profiles by their text, each compiled once.
    profiles: Mutex<HashMap<String, Arc<tokio::sync::OnceCell<Arc<Profile>>>>>,
    /// Handlers by id, as looked up (see [`HANDLER_TTL`]).
    handlers: Cache<Arc<CompiledHandler>>,
    /// Compiled handlers by id, reused while their record is unchanged.
    compiled: Mutex<HashMap<String, Arc<CompiledHandler>>>,
    secrets: Cache<Arc<actiongate_store::HandlerSecrets>>,
    /// Every handler's actions as tools (one entry), until a handler changes.
    tools: Cache<tools::HandlerTools>,
    dispatcher: Dispatcher,
    agent_profiles: Cache<Arc<Profile>>,
    keys: Cache<Caller>,
    /// Bumped when a key is revoked through the gate (see [`KeyGuard`]).
    revocations: watch::Sender<u64>,
    /// Bumped when a handler is registered, changed or retired (see
    /// [`Gate::handlers_changed`]).
    handler_changes: watch::Sender<u64>,
    /// Bumped when a person is added, changed or removed through the gate.
    people_changes: std::sync::atomic::AtomicU64,
    waiters: Waiters,
    deadlines_changed: Notify,
    notify_transport: Arc<dyn Transport>,
    shutdown: CancellationToken,
    pending_limit: pending_limit::PendingLimit,
    /// What every key holds open (see [`holds`]).
    holds: Arc<holds::Holds>,
    /// Every key's requests being answered (see [`holds`]).
    in_flight: Arc<holds::Holds>,
    run_limit: run_limit::RunLimit,
    write_budget: write_budget::WriteBudget,
    /// The receipt signing key, read (or made) on first use.
    receipt_signer: receipts::SignerCell,
}

impl Gate {
    /// The gate over `store`; dispatch sends through `dispatch_transport`
    /// and notifications through `notify_transport`.
    pub fn new(
        store: Store,
        config: GateConfig,
        dispatch_transport: Arc<dyn Transport>,
        notify_transport: Arc<dyn Transport>,
        shutdown: CancellationToken,
    ) -> Gate {
        // Another daemon's changes do not invalidate this one's caches.
        let shared = store.is_shared();
        let ttl = |alone: Option<Duration>| if shared { Some(SHARED_TTL) } else { alone };
        let holds = holds::Holds::new(config.max_open_per_key, holds::Kind::Open);
        let in_flight = holds::Holds::new(config.max_in_flight_per_key, holds::Kind::InFlight);
        Gate(Arc::new(Inner {
            waiters: Waiters::new(store.clone(), shutdown.clone()),
            dispatcher: Dispatcher::new(config.dispatch.clone(), dispatch_transport),
            store,
            config,
            profiles: Mutex::new(HashMap::new()),
            handlers: Cache::new(ttl(Some(HANDLER_TTL))),
            compiled: Mutex::new(HashMap::new()),
            secrets: Cache::new(ttl(Some(HANDLER_TTL))),
            tools: Cache::new(ttl(Some(HANDLER_TTL))),
            agent_profiles: Cache::new(ttl(None)),
            keys: Cache::new(Some(KEY_TTL)),
            revocations: watch::Sender::new(0),
            handler_changes: watch::Sender::new(0),
            people_changes: std::sync::atomic::AtomicU64::new(0),
            deadlines_changed: Notify::new(),
            notify_transport,
            shutdown,
            pending_limit: pending_limit::PendingLimit::default(),
            holds,
            in_flight,
            run_limit: run_limit::RunLimit::default(),
            write_budget: write_budget::WriteBudget::default(),
            receipt_signer: receipts::SignerCell::default(),
        }))
    }

    /// The gate over `store` for a command that works on the database
    /// without serving (keys, the audit export): it sends nothing, and its
    /// background loops are not started.
    pub fn offline(store: Store, config: GateConfig) -> Gate {
        let refuse: Arc<dyn Transport> = Arc::new(transport::Refuse);
        Gate::new(
            store,
            config,
            refuse.clone(),
            refuse,
            CancellationToken::new(),
        )
    }

    /// Starts the background loops (expiry, revocations made elsewhere,
    /// dispatch, notifications, retention) after recovering what the last run left in flight. They
    /// end when the shutdown token is cancelled; await the handles then.
    pub async fn spawn(&self) -> Vec<tokio::task::JoinHandle<()>> {
        let mut tasks = vec![
            tokio::spawn(sweeper::run(self.clone())),
            tokio::spawn(revocations::run(self.clone())),
            tokio::spawn(escalation::run(self.clone())),
        ];
        if self.0.store.is_shared() {
            tasks.push(tokio::spawn(tools::watch_handlers(
                self.clone(),
                SHARED_TTL,
            )));
        }
        dispatch::recover_in_flight(self).await;
        if self.0.config.dispatch_enabled {
            tasks.push(tokio::spawn(dispatch::run(self.clone())));
        } else {
            tracing::warn!(
                "dispatch is paused (dispatch.enabled = false): approved handler actions stay approved"
            );
        }
        tasks.push(tokio::spawn(notify::run(
            self.0.store.clone(),
            self.0.notify_transport.clone(),
            self.0.config.notify,
            self.0.shutdown.clone(),
        )));
        tasks.push(tokio::spawn(retention::run(
            self.0.store.clone(),
            retention::Keep {
                events: self.0.config.retention,
                records: self.0.config.records_retention,
                tainted_sessions: self.0.config.tainted_session_retention,
            },
            self.0.config.prune_interval.min(SEEN_PRUNE_EVERY),
            self.0.shutdown.clone(),
        )));
        tasks
    }

    /// The store: the gate's workflows are the only code that reaches it.
    pub(crate) fn store(&self) -> &Store {
        &self.0.store
    }

    /// The configuration.
    pub fn config(&self) -> &GateConfig {
        &self.0.config
    }

    pub(crate) fn pending_limit(&self) -> &pending_limit::PendingLimit {
        &self.0.pending_limit
    }

    pub(crate) fn run_limit(&self) -> &run_limit::RunLimit {
        &self.0.run_limit
    }

    pub(crate) fn write_budget(&self) -> &write_budget::WriteBudget {
        &self.0.write_budget
    }

    pub(crate) fn dispatcher(&self) -> &Dispatcher {
        &self.0.dispatcher
    }

    /// Long-poll waiters.
    pub fn waiters(&self) -> &Waiters {
        &self.0.waiters
    }

    /// Wakes the expiry sweeper when a new deadline may be earlier.
    pub fn deadlines_changed(&self) -> &Notify {
        &self.0.deadlines_changed
    }

    /// Cancelled when the daemon shuts down.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.0.shutdown
    }

    /// Closes the store (after the loops ended).
    pub async fn close(&self) {
        self.0.store.close().await;
    }

    /// Events committed from now on, in `seq` order (what wakes event
    /// streams).
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Arc<Event>> {
        self.0.store.subscribe()
    }

    /// A number that changes whenever a profile, a handler, a person or a
    /// key is known to have changed (through this daemon, or a handler or
    /// a revocation through another): what was worked out from approvals
    /// rules and approvers before may be stale.
    pub(crate) fn rules_generation(&self) -> (u64, u64, u64) {
        (
            self.0.agent_profiles.generation(),
            self.0.handlers.generation(),
            self.0
                .people_changes
                .load(std::sync::atomic::Ordering::Relaxed)
                .wrapping_add(*self.0.revocations.borrow()),
        )
    }

    /// Notes that a person was added, changed or removed.
    pub(crate) fn people_changed(&self) {
        self.0
            .people_changes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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

    /// What ends a stream or long-poll of `caller`'s once its key is
    /// revoked, counted against `limits.max_open_per_key` while it lives:
    /// 429 when the key holds that many open already.
    pub fn key_guard(&self, caller: &Caller) -> GateResult<KeyGuard> {
        let held = self.0.holds.take(&caller.key_id)?;
        Ok(KeyGuard::new(
            self.0.store.clone(),
            caller.key_id.clone(),
            self.0.revocations.subscribe(),
        )
        .holding(held))
    }

    /// A place for one request of `caller`'s being answered, held until
    /// dropped: 429 when its key has `limits.max_in_flight_per_key` being
    /// answered already. (A long-poll or stream is held by
    /// [`Gate::key_guard`] instead.)
    pub fn in_flight(&self, caller: &Caller) -> GateResult<holds::Held> {
        self.0.in_flight.take(&caller.key_id)
    }

    /// Who holds the key whose secret is `token`: 401 for an unknown or
    /// revoked one. Answers from memory for a second (see [`KEY_TTL`]).
    pub async fn authenticate(&self, token: &str) -> GateResult<Caller> {
        let hash = caller::hash_key(token);
        let ticket = match self.0.keys.get(&hash) {
            Ok(caller) => return Ok(caller),
            Err(ticket) => ticket,
        };
        let key = self
            .0
            .store
            .find_key(&hash)
            .await?
            .ok_or_else(|| GateError::unauthorized("unknown or revoked key"))?;
        let caller = Caller {
            key_id: key.id,
            name: key.name,
            role: key.role,
            agent: key.agent,
            via: None,
        };
        // Only an agent's key is trusted from memory: an operator's or an
        // admin's decides, grants and makes keys, and its revocation through
        // another daemon (or `actiongate keys revoke`) must hold at once. They
        // are few and their requests rare; an agent's are many.
        if caller.role == actiongate_store::Role::Agent {
            self.0.keys.insert(ticket, &hash, caller.clone());
        }
        Ok(caller)
    }

    /// The compiled profile of `agent`: its own, or the configured default.
    pub async fn profile_of(&self, agent: &str) -> GateResult<Arc<Profile>> {
        match self.0.agent_profiles.get(agent) {
            Ok(profile) => Ok(profile),
            Err(ticket) => {
                let profile = self.load_profile(agent).await?;
                self.0.agent_profiles.insert(ticket, agent, profile.clone());
                Ok(profile)
            }
        }
    }

    async fn load_profile(&self, agent: &str) -> GateResult<Arc<Profile>> {
        let Some(record) = self.0.store.get_agent(agent).await? else {
            return Ok(self.0.config.default_profile.clone());
        };
        let Some(json) = record.profile else {
            return Ok(self.0.config.default_profile.clone());
        };
        let text = json.to_string();
        // One compile per profile text however many requests want it at
        // once (an agent's first requests after a restart), each waiting
        // for the same cell rather than compiling its own.
        let cell = {
            let mut cache = self.0.profiles.lock().map_err(|_| GateError::internal())?;
            if cache.len() >= PROFILE_CACHE_MAX && !cache.contains_key(&text) {
                cache.clear();
            }
            cache.entry(text).or_default().clone()
        };
        let profile = cell
            .get_or_try_init(|| async {
                // Compiling up to `MAX_PATTERNS` patterns takes a while; off
                // the runtime's threads it holds up no other request.
                let compiled = tokio::task::spawn_blocking(move || {
                    serde_json::from_value::<ProfileSpec>(json)
                        .map_err(|e| e.to_string())
                        .and_then(|spec| Profile::from_spec(spec).map_err(|e| e.to_string()))
                })
                .await
                .map_err(|_| GateError::internal())?;
                // Stored profiles were validated when set; failing here means
                // the row was edited by hand or rules tightened since (a
                // bound on its size, say), and an unusable profile must not
                // allow anything: nothing is decided for the agent.
                compiled.map(Arc::new).map_err(|e| {
                    tracing::error!(agent, error = %e, "stored profile does not compile");
                    GateError::conflict(format!(
                        "the stored profile of agent '{agent}' does not compile ({e}); an \
                         admin must set it again (PUT /v1/agents/{agent})"
                    ))
                })
            })
            .await?;
        Ok(profile.clone())
    }

    /// Forgets what is cached of handler `id` after it changed.
    pub fn forget_handler(&self, id: &str) {
        self.0.handlers.invalidate(|k, _| k == id);
        self.0.secrets.invalidate(|k, _| k == id);
        self.0.tools.invalidate(|_, _| true);
        self.0.handler_changes.send_modify(|n| *n += 1);
    }

    /// Forgets every cached handler after one changed through another
    /// daemon (see [`tools::watch_handlers`]).
    pub(crate) fn handlers_changed_elsewhere(&self) {
        self.0.handlers.invalidate(|_, _| true);
        self.0.secrets.invalidate(|_, _| true);
        self.0.tools.invalidate(|_, _| true);
        self.0.handler_changes.send_modify(|n| *n += 1);
    }

    pub(crate) fn tools_cache(&self) -> &Cache<tools::HandlerTools> {
        &self.0.tools
    }

    /// Changes whenever a handler was registered, changed or retired: on
    /// this daemon at once, through another daemon on the same database
    /// within a second (what adapters offer as tools follows it).
    pub fn handlers_changed(&self) -> watch::Receiver<u64> {
        self.0.handler_changes.subscribe()
    }

    /// A handler compiled for use (retired ones too; callers check), cached
    /// until its registration changes.
    pub async fn handler(&self, id: &str) -> GateResult<Arc<CompiledHandler>> {
        let ticket = match self.0.handlers.get(id) {
            Ok(h) => return Ok(h),
            Err(ticket) => ticket,
        };
        let record = match self.0.store.get_handler(id).await {
            Ok(r) => r,
            Err(actiongate_store::StoreError::NotFound) => {
                return Err(GateError::not_found(format!("no handler '{id}'")));
            }
            Err(e) => return Err(e.into()),
        };
        let reuse = self
            .0
            .compiled
            .lock()
            .map_err(|_| GateError::internal())?
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
                    .map_err(|_| GateError::internal())?
                    .insert(id.to_owned(), h.clone());
                h
            }
        };
        self.0.handlers.insert(ticket, id, compiled.clone());
        Ok(compiled)
    }

    /// Handler `id`'s secrets valid now (the current one first), cached
    /// like [`Gate::handler`].
    pub async fn handler_secrets(&self, id: &str) -> GateResult<Vec<String>> {
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
