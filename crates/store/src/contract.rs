//! The store's contract: every operation the gate may ask of the store,
//! answered by the backend the daemon was started on. Each line below is
//! one operation; each backend implements all of them (the build fails
//! otherwise), and the conformance suite (`tests/`) runs the same tests
//! against both.

use std::time::Duration;

use actiongate_policy as policy;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::anchor::AuditKey;
use crate::audit::Anchor;
use crate::connectors::Outgoing;
use crate::{
    Action, ActionAttempt, ActionFilter, Agent, ApiKey, ApproveFirst, AttemptNext, AttemptRecord,
    Backend, Claimed, Delivery, DeliveryStatus, DueDelivery, Event, GrantCreated, GrantFilter,
    GrantRecord, GrantRequest, GrantRequestStatus, HandlerRecord, HandlerSecrets, Inserted,
    NewAction, NewGrant, NewGrantRequest, NewHandler, NewKey, NewPerson, NewSubscription,
    NextDispatch, Outcome, Page, PendingCounts, Person, RequestKey, SessionFilter, Store,
    StoreError, Subscription, TeamDecided, TeamDecision, Transition,
};

/// Defines each operation on [`Store`] as a call of the same method of the
/// backend in use.
macro_rules! contract {
    ($( $(#[doc = $doc:expr])* pub async fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) $(-> $ret:ty)?; )*) => {
        impl Store {
            $(
                $(#[doc = $doc])*
                pub async fn $name(&self $(, $arg: $ty)*) $(-> $ret)? {
                    match &self.0 {
                        Backend::Sqlite(s) => s.$name($($arg),*).await,
                        // Boxed: a Postgres call's future is several KiB
                        // (SQLite's are a few hundred bytes), and unboxed
                        // it would size every caller's future, on either
                        // backend, long-polls waiting for a human included.
                        // Bounded: a stalled database is an error
                        // within a known time, not a hang.
                        Backend::Postgres(p) => p.bounded(Box::pin(p.$name($($arg),*))).await,
                    }
                }
            )*
        }
    };
}

contract! {

    // actions
    /// Stores a decided action and the event recording it. With an
    /// idempotency key already used by this agent: the same request returns
    /// the existing action (`false`: nothing new stored), a different one is
    /// a [`StoreError::Conflict`].
    pub async fn insert_action(&self, new: NewAction) -> Result<(Action, bool), StoreError>;
    /// [`Store::insert_action`], answering also with the new action already
    /// rendered as JSON when it was just created.
    pub async fn create_action(&self, new: NewAction) -> Result<Inserted, StoreError>;
    /// Moves an action from one of `t.from` to `t.to` if it is still in one
    /// of them; otherwise [`StoreError::WrongState`] with where it is now.
    pub async fn transition(&self, id: &str, t: Transition) -> Result<Action, StoreError>;
    /// Expires every pending action whose deadline is at or before `at`.
    pub async fn expire_due(&self, at: DateTime<Utc>) -> Result<Vec<Action>, StoreError>;
    /// The earliest deadline among pending actions.
    pub async fn next_deadline(&self) -> Result<Option<DateTime<Utc>>, StoreError>;
    /// One action by id.
    pub async fn get_action(&self, id: &str) -> Result<Action, StoreError>;
    /// The action `agent` stored under idempotency key `key`, if any.
    pub async fn action_for_key(&self, agent: &str, key: &str) -> Result<Option<Action>, StoreError>;
    /// A page of actions, newest first.
    pub async fn list_actions(&self, f: &ActionFilter) -> Result<Vec<Action>, StoreError>;
    /// How many actions, grant requests and plans wait for a human.
    pub async fn pending_counts(&self) -> Result<PendingCounts, StoreError>;

    // agents
    /// Creates or replaces an agent; returns it and whether it was new.
    pub async fn put_agent(&self, id: &str, name: Option<String>, profile: Option<Value>) -> Result<(Agent, bool), StoreError>;
    /// One agent, if registered.
    pub async fn get_agent(&self, id: &str) -> Result<Option<Agent>, StoreError>;
    /// Every registered agent, by id.
    pub async fn list_agents(&self) -> Result<Vec<Agent>, StoreError>;

    // anchor
    /// Starts the task that appends a signed `audit.anchor` event every
    /// `interval` when events were written since the last one. It stops
    /// with the store.
    pub async fn start_anchors(&self, key: AuditKey, interval: Duration);

    // audit
    /// Where the chain of the stored events starts.
    pub async fn audit_anchor(&self) -> Result<Anchor, StoreError>;
    /// The seq of the first event (in seq order) at or after `at`.
    pub async fn first_seq_since(&self, at: DateTime<Utc>) -> Result<Option<i64>, StoreError>;
    /// Deletes up to `max` of the oldest events written before `cutoff`
    /// (never one a subscription has not yet turned into deliveries) and
    /// moves the anchor past them. Returns how many events were pruned.
    /// Deliveries are records: `records.retention` deletes them, with
    /// their attempts.
    pub async fn prune_events(&self, cutoff: DateTime<Utc>, max: i64) -> Result<usize, StoreError>;

    // connectors
    /// Queues the message of `item` in `chat` unless one was queued before;
    /// whether it was queued now.
    pub async fn connector_post(&self, chat: &str, item: &str, body: String) -> Result<bool, StoreError>;
    /// The chats that have a message of `item` whose outcome is not queued.
    pub async fn connector_open_chats(&self, item: &str) -> Result<Vec<String>, StoreError>;
    /// Queues the outcome edit of `item`'s message in `chat` once; whether
    /// it was queued now.
    pub async fn connector_edit(&self, chat: &str, item: &str, body: String) -> Result<bool, StoreError>;
    /// Queues an update of `item`'s message in `chat` (an `edit` whose
    /// card says `progress`) while its outcome is not queued; whether it was.
    pub async fn connector_update(&self, chat: &str, item: &str, body: String) -> Result<bool, StoreError>;
    /// Outgoing messages due at `at`: up to `limit` of each chat, oldest
    /// first (a chat's backlog never hides another chat's messages).
    pub async fn connector_due(&self, at: DateTime<Utc>, limit: i64) -> Result<Vec<Outgoing>, StoreError>;
    /// When the next outgoing message is due, if any waits.
    pub async fn connector_next_due(&self) -> Result<Option<DateTime<Utc>>, StoreError>;
    /// Forgets outgoing message `id` (sent, or given up), recording the
    /// chat's message id when a post was sent.
    pub async fn connector_sent(&self, id: i64, message_ref: Option<String>) -> Result<(), StoreError>;
    /// Records a failed attempt of `id` and when to try again.
    pub async fn connector_retry(&self, id: i64, at: DateTime<Utc>, error: String) -> Result<(), StoreError>;
    /// The chat's id of `item`'s message in `chat`, once sent.
    pub async fn connector_message_ref(&self, chat: &str, item: &str) -> Result<Option<String>, StoreError>;
    /// The item whose message in `chat` has id `message_ref`.
    pub async fn connector_item_of(&self, chat: &str, message_ref: &str) -> Result<Option<String>, StoreError>;
    /// The ids of `item`'s messages in `chat` its outcome has not edited yet.
    pub async fn connector_unedited(&self, chat: &str, item: &str) -> Result<Vec<String>, StoreError>;
    /// Message `message_ref` of `chat` shows its item's outcome (or its edit was given up).
    pub async fn connector_copy_edited(&self, chat: &str, message_ref: &str) -> Result<(), StoreError>;
    /// Records `message_ref` as one more message of `item` in `chat` when
    /// `item` has a message there; whether it was not known before.
    pub async fn connector_learn_copy(&self, chat: &str, item: &str, message_ref: &str) -> Result<bool, StoreError>;
    /// Queues one more outcome edit of `item`'s messages in `chat` (those not edited yet).
    pub async fn connector_edit_again(&self, chat: &str, item: &str, body: String) -> Result<(), StoreError>;
    /// Whether the post of `item`'s message in `chat` is still queued.
    pub async fn connector_post_queued(&self, chat: &str, item: &str) -> Result<bool, StoreError>;
    /// A value `chat` keeps.
    pub async fn connector_state(&self, chat: &str, key: &str) -> Result<Option<String>, StoreError>;
    /// Keeps `value` for `chat`.
    pub async fn set_connector_state(&self, chat: &str, key: &str, value: String) -> Result<(), StoreError>;
    /// Records interaction `id` of `chat` as handled: `true` the first
    /// time, `false` for a repeat. Ids older than a week are forgotten.
    pub async fn connector_first_seen(&self, chat: &str, id: &str) -> Result<bool, StoreError>;

    // dispatch
    /// Approved handler actions due for an attempt at `at`, oldest first.
    ///
    /// The dispatch queries name their partial index (`INDEXED BY`): without
    /// statistics SQLite picks `actions_status` (or `actions_handler`) and
    /// walks every approved action, decision-only ones included, so each
    /// pass grew with the history (76,000 rows after a minute of load).
    /// Actions of the handlers in `skip` (whose room in flight is full) are
    /// left out, so that one handler's backlog does not fill every batch.
    pub async fn due_for_dispatch(&self, at: DateTime<Utc>, limit: i64, skip: Vec<String>) -> Result<Vec<(String, String)>, StoreError>;
    /// Moves each still-approved action to `running` for its next attempt,
    /// leased until `lease_until`; the ones another claimer won are left out.
    pub async fn claim(&self, ids: Vec<String>, lease_until: DateTime<Utc>) -> Result<Vec<Claimed>, StoreError>;
    /// Claims the approved action of `handler` that has waited longest and
    /// is due at `at`, if there is one, for its next attempt leased until
    /// `lease_until`: how a finished attempt hands its room in the limits
    /// straight to the next action waiting for it.
    pub async fn claim_next(&self, handler: &str, at: DateTime<Utc>, lease_until: DateTime<Utc>) -> Result<Option<Claimed>, StoreError>;
    /// Records attempt `rec` of `running`, as its claim returned it, and
    /// settles it with `outcome`: the same as [`Store::finish_attempt`] with
    /// [`AttemptNext::Settle`], written with whatever else is queued in one
    /// hand-off to the writer's connection. `None` when the attempt was
    /// superseded (lease lapsed, result already in).
    pub async fn settle_attempt(&self, running: &Action, rec: &ActionAttempt, outcome: Outcome) -> Result<Option<Action>, StoreError>;
    /// Records attempt `rec` of a running action and applies `next`; `None`
    /// when the attempt was superseded (lease lapsed, result already in).
    pub async fn finish_attempt(&self, id: &str, rec: ActionAttempt, next: AttemptNext) -> Result<Option<Action>, StoreError>;
    /// Running actions whose lease lapsed at `at` go back to approved (due
    /// now) for another attempt, or fail when `max_attempts` are used up.
    /// With `all`, every running action is released (start-up after a crash:
    /// whatever was in flight is lost).
    pub async fn release_leases(&self, at: DateTime<Utc>, max_attempts: i64, all: bool) -> Result<Vec<Action>, StoreError>;
    /// When dispatch next has something to do: the earliest retry coming
    /// due of a handler not in `skip` (those with no room in flight) and
    /// the earliest lease lapsing (`None` when there is none).
    pub async fn next_dispatch_times(&self, skip: Vec<String>) -> Result<NextDispatch, StoreError>;
    /// An executor's asynchronous result for `attempt` (the current one or
    /// an earlier one: all share the webhook-id the executor deduplicates
    /// by). A `webhook_id` seen before is a replay ([`StoreError::Conflict`]);
    /// a result for an attempt not yet sent or for an action not running is
    /// [`StoreError::WrongState`]. The `webhook_id` is recorded as seen
    /// whether the result is accepted or refused; only a fault leaves it
    /// unrecorded.
    pub async fn accept_result(&self, id: &str, webhook_id: String, attempt: i64, outcome: Outcome) -> Result<Action, StoreError>;
    /// Records a signed callback's `webhook_id` as seen without accepting
    /// anything (a callback refused before [`Store::accept_result`]);
    /// `false` when it was seen before.
    pub async fn consume_webhook(&self, webhook_id: String) -> Result<bool, StoreError>;
    /// Forgets replay-protection ids older than `before` (timestamps older
    /// than the tolerance are refused anyway).
    pub async fn prune_seen_webhooks(&self, before: DateTime<Utc>) -> Result<u64, StoreError>;
    /// Deletes up to `limit` records of `kind` settled before `cutoff`, with
    /// the rows that only refer to them; how many records.
    pub async fn prune_records(&self, kind: crate::records::Records, cutoff: DateTime<Utc>, limit: i64) -> Result<u64, StoreError>;
    /// Deletes rate rows past their hour before `now`, and chat interactions
    /// seen before `cutoff`; how many rows.
    pub async fn prune_stale(&self, now: DateTime<Utc>, cutoff: DateTime<Utc>) -> Result<u64, StoreError>;
    /// Replaces a handler's secret; the old one stays valid until `grace_until`.
    pub async fn rotate_handler_secret(&self, id: &str, secret: String, grace_until: DateTime<Utc>) -> Result<(), StoreError>;
    /// A handler's secrets: the current one and the rotated-out one with
    /// the end of its grace period (see [`HandlerSecrets::valid_at`]).
    pub async fn handler_secret_set(&self, id: &str) -> Result<HandlerSecrets, StoreError>;
    /// A handler's valid secrets: the current one first, then the previous
    /// one while its grace period lasts.
    pub async fn handler_secrets(&self, id: &str) -> Result<Vec<String>, StoreError>;

    // events
    /// The highest committed event `seq` (possibly not yet published).
    pub async fn newest_seq(&self) -> Result<i64, StoreError>;
    /// Up to `limit` events after `seq`, oldest first; only `agent`'s when given.
    pub async fn events_after(&self, seq: i64, agent: Option<&str>, limit: i64) -> Result<Vec<Event>, StoreError>;
    /// Every event about one action, oldest first.
    pub async fn action_events(&self, action_id: &str) -> Result<Vec<Event>, StoreError>;

    // grant_requests
    /// Stores a pending grant request.
    pub async fn create_grant_request(&self, new: NewGrantRequest) -> Result<GrantRequest, StoreError>;
    /// Stores a pending grant request under the agent's idempotency key:
    /// one it used before for the same request answers that request,
    /// unchanged (`false`: not created now); another request is a conflict.
    pub async fn create_grant_request_once(&self, new: NewGrantRequest, key: RequestKey) -> Result<(GrantRequest, bool), StoreError>;
    /// The grant request `agent` made under idempotency key `key`, if any;
    /// a conflict when that was another request.
    pub async fn grant_request_for_key(&self, agent: &str, key: &RequestKey) -> Result<Option<GrantRequest>, StoreError>;
    /// Approves a pending request by creating `grant`, in one transaction.
    pub async fn approve_grant_request(&self, id: &str, grant: NewGrant) -> Result<(GrantRequest, GrantCreated), StoreError>;
    /// Denies a pending request.
    pub async fn deny_grant_request(&self, id: &str, decided_by: String, reason: Option<String>) -> Result<GrantRequest, StoreError>;
    /// Expires every pending request whose deadline is at or before `at`.
    pub async fn expire_grant_requests(&self, at: DateTime<Utc>) -> Result<Vec<GrantRequest>, StoreError>;
    /// The earliest deadline among pending grant requests.
    pub async fn next_grant_request_deadline(&self) -> Result<Option<DateTime<Utc>>, StoreError>;
    /// One grant request.
    pub async fn get_grant_request(&self, id: &str) -> Result<GrantRequest, StoreError>;
    /// A page of grant requests, newest (or oldest) first, in id order;
    /// only `agent`'s and/or in `status` when given.
    pub async fn list_grant_requests(&self, agent: Option<&str>, status: Option<GrantRequestStatus>, page: &Page) -> Result<Vec<GrantRequest>, StoreError>;

    // grants
    /// Stores a grant; approves `first` (if given) and every pending action
    /// the grant covers, all in one transaction.
    pub async fn create_grant(&self, new: NewGrant, first: Option<ApproveFirst>) -> Result<GrantCreated, StoreError>;
    /// Stores a grant under an operator's idempotency key: the same key
    /// with the same request again answers the grant made the first time
    /// (`repeated`, nothing changed), with another request a conflict.
    pub async fn create_grant_once(&self, new: NewGrant, key: RequestKey) -> Result<GrantCreated, StoreError>;
    /// Revokes a grant; a second revoke returns the revoked grant unchanged.
    pub async fn revoke_grant(&self, id: &str) -> Result<GrantRecord, StoreError>;
    /// One grant.
    pub async fn get_grant(&self, id: &str) -> Result<GrantRecord, StoreError>;
    /// Grants, newest first.
    pub async fn list_grants(&self, f: &GrantFilter) -> Result<Vec<GrantRecord>, StoreError>;
    /// Active grants that may apply to `agent` acting on `tool` (a tool
    /// name or a handler id), as the policy crate sees them. Cached until
    /// the next commit that may change grants (see `grant_cache`).
    pub async fn active_grants(&self, agent: &str, tool: &str) -> Result<Vec<policy::Grant>, StoreError>;

    /// Active grants for a session or a count of uses that may apply to
    /// `agent` acting on `tool` in `session`, each with its uses left (`None`:
    /// not counted); cached like `active_grants` (see
    /// `grant_cache`).
    pub async fn scoped_grants(&self, agent: &str, session: Option<String>, tool: &str) -> Result<Vec<(policy::Grant, Option<i64>)>, StoreError>;

    // handlers
    /// Registers a new handler with its secret; an existing id (even a
    /// retired one, whose history stays) is a conflict.
    pub async fn create_handler(&self, h: NewHandler, secret: String) -> Result<HandlerRecord, StoreError>;
    /// Replaces a live handler's registration, keeping its secret.
    pub async fn replace_handler(&self, h: NewHandler) -> Result<HandlerRecord, StoreError>;
    /// Retires a handler: no new actions; its history stays readable.
    pub async fn retire_handler(&self, id: &str) -> Result<HandlerRecord, StoreError>;
    /// One handler, retired or not.
    pub async fn get_handler(&self, id: &str) -> Result<HandlerRecord, StoreError>;
    /// Every handler, by id; retired ones only when asked.
    pub async fn list_handlers(&self, include_retired: bool) -> Result<Vec<HandlerRecord>, StoreError>;
    /// A page of handlers by id: those after `page.after`, at most
    /// `page.limit`; retired ones only when asked.
    pub async fn handlers_page(&self, include_retired: bool, page: &Page) -> Result<Vec<HandlerRecord>, StoreError>;
    /// The webhook secret of a handler.
    pub async fn handler_secret(&self, id: &str) -> Result<String, StoreError>;

    // keys
    /// Stores a new key.
    pub async fn create_key(&self, key: NewKey) -> Result<ApiKey, StoreError>;
    /// The live (not revoked) key with this hash.
    pub async fn find_key(&self, hash: &str) -> Result<Option<ApiKey>, StoreError>;
    /// Every key, newest first.
    pub async fn list_keys(&self) -> Result<Vec<ApiKey>, StoreError>;
    /// Revokes a key; revoking twice returns the already revoked key.
    pub async fn revoke_key(&self, id: &str) -> Result<ApiKey, StoreError>;
    /// Whether key `id` exists and is not revoked.
    pub async fn key_active(&self, id: &str) -> Result<bool, StoreError>;
    /// Those of `ids` that are revoked or unknown.
    pub async fn inactive_keys(&self, ids: Vec<String>) -> Result<Vec<String>, StoreError>;
    /// Stores `key`, an admin key, only if no admin key is active (across
    /// every node): what a first start does. `None`: one was active.
    pub async fn create_first_admin_key(&self, key: NewKey) -> Result<Option<ApiKey>, StoreError>;
    /// How many admin keys are not revoked.
    pub async fn active_admin_keys(&self) -> Result<i64, StoreError>;

    // limits
    /// How many of `agent`'s actions and grant requests wait for a human.
    pub async fn pending_of_agent(&self, agent: &str) -> Result<i64, StoreError>;
    /// Appends a `limit.reached` event about `agent`, `data` saying which
    /// limit.
    pub async fn record_limit_reached(&self, agent: &str, data: actiongate_api::model::Json) -> Result<(), StoreError>;

    // people
    /// Creates (`create`) or replaces a person with their identities; a
    /// name or identity another person has is a [`StoreError::Conflict`].
    pub async fn put_person(&self, p: NewPerson, create: bool) -> Result<Person, StoreError>;
    /// One person.
    pub async fn get_person(&self, id: &str) -> Result<Person, StoreError>;
    /// Every person, by name.
    pub async fn list_people(&self) -> Result<Vec<Person>, StoreError>;
    /// Deletes a person and their identities.
    pub async fn delete_person(&self, id: &str) -> Result<(), StoreError>;
    /// The person `identity` (`key:<id>`, `telegram:<user id>`, …) belongs to.
    pub async fn person_of(&self, identity: &str) -> Result<Option<Person>, StoreError>;

    // approvals
    /// One person's decision on pending action `id`, planned from the row
    /// read under its lock and written with its event in one transaction:
    /// the same person twice is a [`StoreError::Conflict`], a settled or
    /// expired action [`StoreError::WrongState`].
    pub async fn team_decide(&self, id: &str, d: TeamDecision) -> Result<TeamDecided, StoreError>;
    /// Marks pending action `id` escalated with its `action.escalated`
    /// event, once; `None` when it was before or is not pending.
    pub async fn escalate(&self, id: &str) -> Result<Option<Action>, StoreError>;
    /// Drops the approvals of pending action `id` given through the
    /// identities `lapsed` (their approvers could not give them now), with
    /// an `action.approval` event; `None` when it holds none of them or is
    /// not pending.
    pub async fn drop_lapsed(&self, id: &str, lapsed: Vec<String>) -> Result<Option<Action>, StoreError>;
    /// The actions asked after event `seq` (`(seq, id)` of their
    /// `action.enqueued` events, oldest first, at most `limit`): what the
    /// escalation sweep reads each second, only what is new.
    pub async fn enqueued_after(&self, seq: i64, limit: i64) -> Result<Vec<(i64, String)>, StoreError>;
    // rate
    /// Takes one slot of each `(key, max_per_hour)` of `agent` at `at`, all
    /// or none: `None` when taken, else the first key at its maximum over
    /// the hour before `at`.
    pub async fn rate_take(&self, agent: &str, limits: Vec<(String, i64)>, at: DateTime<Utc>) -> Result<Option<String>, StoreError>;
    /// The first `(key, max_per_hour)` of `agent` at its maximum over the
    /// hour before `at`, taking nothing (a dry run's view of `rate_take`).
    pub async fn rate_full(&self, agent: &str, limits: Vec<(String, i64)>, at: DateTime<Utc>) -> Result<Option<String>, StoreError>;

    // receipts
    /// The receipt signing key every daemon on this database shares;
    /// `candidate` becomes it when none is stored yet.
    pub async fn receipt_key(&self, candidate: crate::receipts::StoredReceiptKey) -> Result<crate::receipts::StoredReceiptKey, StoreError>;
    /// The params of an action as its agent sent them (`None`: decision-only).
    pub async fn action_params(&self, id: &str) -> Result<Option<String>, StoreError>;
    // sessions and plans
    /// Records that `agent` acts in session `id` now (creating it, or
    /// voiding its grants and opening it again when it had ended or been
    /// idle since `idle_before`); another agent's session is a conflict.
    pub async fn touch_session(&self, agent: String, id: String, runtime: Option<String>, idle_before: DateTime<Utc>) -> Result<actiongate_api::sessions::Session, StoreError>;
    /// Marks a session tainted by an action, unless it already is.
    pub async fn taint_session(&self, id: String, action_id: String, action_string: String) -> Result<(), StoreError>;
    /// The action (id, action string) that taints session `session` under
    /// `profile`: the one its row records, or else the first of its actions
    /// let run that `profile` says taints; `None` when none does.
    pub async fn session_taint(&self, session: String, profile: std::sync::Arc<policy::Profile>) -> Result<Option<(String, String)>, StoreError>;
    /// One session.
    pub async fn get_session(&self, id: &str, idle_before: DateTime<Utc>) -> Result<Option<actiongate_api::sessions::Session>, StoreError>;
    /// The agent session `id` belongs to, if it was ever used.
    pub async fn session_owner(&self, id: &str) -> Result<Option<String>, StoreError>;
    /// Records that key session `carrier` named session `id` over `/mcp`
    /// (unless another did first): a taint recorded on `id` from then on
    /// is recorded on `carrier` too. False when `id` is not stored (yet).
    pub async fn link_carrier(&self, id: String, carrier: String) -> Result<bool, StoreError>;
    /// When session `id` was tainted, if it is (its row alone: no counts).
    pub async fn session_tainted_at(&self, id: &str) -> Result<Option<DateTime<Utc>>, StoreError>;
    /// A page of the sessions `filter` holds, newest (or oldest) first by
    /// when they began (then id).
    pub async fn list_sessions(&self, filter: SessionFilter, page: Page, idle_before: DateTime<Utc>) -> Result<Vec<actiongate_api::sessions::Session>, StoreError>;
    /// Ends a session and voids its grants.
    pub async fn end_session(&self, id: String, by: String, idle_before: DateTime<Utc>) -> Result<actiongate_api::sessions::Session, StoreError>;
    /// Ends every open session last seen at or before `idle_before`
    /// (ended by `idle`), revoking their grants; how many it ended.
    pub async fn end_idle_sessions(&self, idle_before: DateTime<Utc>) -> Result<usize, StoreError>;
    /// When the open session seen longest ago was last seen.
    pub async fn oldest_open_session(&self) -> Result<Option<DateTime<Utc>>, StoreError>;
    /// Stores a pending plan.
    pub async fn create_plan(&self, plan: actiongate_api::sessions::Plan, key: Option<RequestKey>) -> Result<(actiongate_api::sessions::Plan, bool), StoreError>;
    /// The plan `agent` asked for under idempotency key `key`, if any; a
    /// conflict when that was another request.
    pub async fn plan_for_key(&self, agent: &str, key: &RequestKey) -> Result<Option<actiongate_api::sessions::Plan>, StoreError>;
    /// One plan.
    pub async fn get_plan(&self, id: &str) -> Result<actiongate_api::sessions::Plan, StoreError>;
    /// A page of plans, newest (or oldest) first by when they were made
    /// (then id); only in `status` when given.
    pub async fn list_plans(&self, status: Option<String>, page: &Page) -> Result<Vec<actiongate_api::sessions::Plan>, StoreError>;
    /// Decides a pending plan, storing the grants its approval makes in
    /// the same transaction.
    pub async fn decide_plan(&self, id: String, status: &'static str, by: String, steps: Vec<actiongate_api::sessions::PlanStep>, grants: Vec<NewGrant>) -> Result<actiongate_api::sessions::Plan, StoreError>;
    /// Appends an `action.undecided` event about a run of `agent`.
    pub async fn record_undecided(&self, agent: &str, data: actiongate_api::model::Json) -> Result<(), StoreError>;
    /// Claims the allowed or approved action that covers a reported run,
    /// one run per action.
    pub async fn claim_run(&self, run: crate::plans::RunReport) -> Result<Option<String>, StoreError>;
    /// Whether a reported run claimed action `id` ([`Store::claim_run`]).
    pub async fn run_claimed(&self, id: &str) -> Result<bool, StoreError>;

    // subscriptions
    /// Stores a subscription; it receives events committed from now on.
    pub async fn create_subscription(&self, new: NewSubscription) -> Result<Subscription, StoreError>;
    /// Every subscription, oldest first.
    pub async fn list_subscriptions(&self) -> Result<Vec<Subscription>, StoreError>;
    /// One subscription.
    pub async fn get_subscription(&self, id: &str) -> Result<Subscription, StoreError>;
    /// Deletes a subscription with its deliveries.
    pub async fn delete_subscription(&self, id: &str) -> Result<(), StoreError>;
    /// Turns up to `limit` events past the subscriptions' cursors into
    /// deliveries and moves the cursors, in one transaction. Returns how
    /// many deliveries were created and whether more events wait.
    pub async fn fan_out(&self, limit: i64) -> Result<(usize, bool), StoreError>;
    /// Pending deliveries due at `at`, earliest first.
    pub async fn due_deliveries(&self, at: DateTime<Utc>, limit: i64) -> Result<Vec<DueDelivery>, StoreError>;
    /// Whether some subscription has not yet seen the newest event.
    pub async fn outbox_behind(&self) -> Result<bool, StoreError>;
    /// The `limit` earliest pending deliveries and when each is due.
    pub async fn pending_schedule(&self, limit: i64) -> Result<Vec<(String, DateTime<Utc>)>, StoreError>;
    /// When the next pending delivery is due.
    pub async fn next_delivery_due(&self) -> Result<Option<DateTime<Utc>>, StoreError>;
    /// Records an attempt and what follows from it.
    pub async fn record_attempt(&self, id: &str, rec: AttemptRecord) -> Result<(), StoreError>;
    /// A page of a subscription's deliveries, newest event first, each with
    /// its attempts; `before` is the `event_seq` the previous page ended at.
    pub async fn list_deliveries(&self, subscription_id: &str, status: Option<DeliveryStatus>, before: Option<i64>, limit: i64) -> Result<Vec<Delivery>, StoreError>;
}
