//! Grants scoped to a session or a count of uses (issue 33), on SQLite:
//! reading the ones that may apply to a request, and taking a use in the
//! transaction that stores the action it allows. Postgres: `pg/sessions.rs`.

use std::sync::Arc;

use actiongate_policy as policy;
use sqlx::SqliteConnection;

use crate::SqliteStore;
use crate::actions::{NewAction, insert_on};
use crate::error::StoreError;
use crate::grant_cache::Scoped;
use crate::grants::grant_columns;
use crate::time::{now, to_ms};
use actiongate_api::model::{Decision, DecisionResult};

/// The decision of an action whose grant had no use left when it was
/// stored: a human decides it.
pub(crate) fn used_up(new: &mut NewAction, grant: &str) {
    new.decision = Decision {
        result: DecisionResult::Ask,
        reason: format!("grant `{grant}` has no uses left"),
        rule: None,
    };
    new.take_use = None;
}

/// The decision of an action allowed by grant `gone`, which was revoked
/// or expired between the decision and the transaction storing it: a human
/// decides it.
pub(crate) fn lapsed(new: &mut NewAction, gone: &str) {
    new.decision = Decision {
        result: DecisionResult::Ask,
        reason: format!(
            "grant `{gone}` was revoked or expired as it allowed this; a human must decide"
        ),
        rule: None,
    };
    new.take_use = None;
}

/// Whether `new` relies on grants read from a cache to be allowed, which
/// the transaction storing it must find still in force ([`lapsed_on`]).
pub(crate) fn relies_on_grants(new: &NewAction) -> bool {
    !new.relies_on.is_empty() && new.decision.result == DecisionResult::Allow
}

/// Turns `new`, allowed by grants the gate read from its cache, into an
/// asked action when one of them is no longer in force: revoked (a session
/// ended, an operator revoked it) or expired after it was read and before
/// this transaction. On the writer, whose transactions are serial, a
/// revocation committed before it is always seen, so an allow is never
/// stored after its grant's revocation (Postgres: `pg/grants.rs`).
async fn lapsed_on(conn: &mut SqliteConnection, new: &mut NewAction) -> Result<(), StoreError> {
    if !relies_on_grants(new) {
        return Ok(());
    }
    let at = to_ms(now());
    for id in new.relies_on.clone() {
        let live = sqlx::query_scalar::<_, i64>(
            "SELECT 1 FROM grants WHERE id = ? AND revoked_at IS NULL \
             AND (expires_at IS NULL OR expires_at > ?)",
        )
        .bind(&id)
        .bind(at)
        .fetch_optional(&mut *conn)
        .await?
        .is_some();
        if !live {
            lapsed(new, &id);
            break;
        }
    }
    Ok(())
}

/// Takes one use of `new.take_use` on `conn`, or turns `new` into an asked
/// action when none is left (a compare-and-set: of concurrent requests on
/// a grant of `n` uses, exactly `n` take one).
async fn take_use_on(conn: &mut SqliteConnection, new: &mut NewAction) -> Result<(), StoreError> {
    let Some(grant) = new.take_use.clone() else {
        return Ok(());
    };
    // The last use marks when the grant was used up, for retention.
    let at = to_ms(now());
    let taken = sqlx::query(
        "UPDATE grants SET uses_left = uses_left - 1, \
         spent_at = CASE WHEN uses_left = 1 THEN ? ELSE spent_at END \
         WHERE id = ? AND uses_left > 0 \
         AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)",
    )
    .bind(at)
    .bind(&grant)
    .bind(at)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if taken == 0 {
        used_up(new, &grant);
    }
    Ok(())
}

/// Whether a grant must leave pending `action` to a human: `profile`
/// guards it and its session is tainted. A taint is read where a grant is
/// about to settle a pending action (when the grant is made, or, on
/// Postgres, when an asked action is stored), as the gate reads it for a
/// new one: a guarded action of a tainted session asks whatever grant
/// covers it (docs/sessions.md).
pub(crate) fn guarded(profile: &policy::Profile, action: &actiongate_api::model::Action) -> bool {
    action.session.is_some()
        && profile.way_out_call(
            &action.action_string,
            action.scope.as_ref(),
            action.reaches_out(),
        )
}

/// The first action `profile` says taints (`Profile::taints`) among
/// `reads`, the actions of a session its agent was let run.
pub(crate) fn first_taint(
    profile: &policy::Profile,
    reads: Vec<(String, String)>,
) -> Option<(String, String)> {
    reads
        .into_iter()
        .find(|(_, s)| profile.taints_call(s, None, false))
}

/// Most characters of a tainting action kept with its session: it names
/// the action in reasons and plans, and the action itself holds the rest.
pub(crate) const TAINT_SHOWN: usize = 200;

/// `action_string` as its session's taint record keeps it.
pub(crate) fn taint_text(action_string: &str) -> String {
    actiongate_api::text::clip(action_string, TAINT_SHOWN)
}

/// Records on `conn` that `action` (let run: allowed, or approved) tainted
/// its session, unless the session was tainted already: in the
/// transaction that lets it run, so no decision after it reads the
/// session untainted.
pub(crate) async fn mark_taint_on(
    conn: &mut SqliteConnection,
    action: &actiongate_api::model::Action,
) -> Result<(), StoreError> {
    match &action.session {
        Some(session) => record_taint_on(conn, session, &action.id, &action.action_string).await,
        None => Ok(()),
    }
}

/// Records on `conn` that action `action_id` (`action_string`) tainted
/// `session`, unless it was tainted already; and that the key session
/// which named `session` over `/mcp` (its `carrier`) met the taint now:
/// the carrier's first taint stays named, its time is now.
pub(crate) async fn record_taint_on(
    conn: &mut SqliteConnection,
    session: &str,
    action_id: &str,
    action_string: &str,
) -> Result<(), StoreError> {
    let what = taint_text(action_string);
    let at = to_ms(now());
    // One statement for both rows: `session` keeps a first taint and its
    // time; its carrier keeps a first taint, and its time is now.
    sqlx::query(
        "UPDATE sessions SET tainted_by = COALESCE(tainted_by, ?1), \
         taint_action = COALESCE(taint_action, ?2), \
         tainted_at = CASE WHEN tainted_by IS NULL \
           OR id = (SELECT carrier FROM sessions WHERE id = ?4) THEN ?3 ELSE tainted_at END \
         WHERE id IN (?4, (SELECT carrier FROM sessions WHERE id = ?4))",
    )
    .bind(action_id)
    .bind(&what)
    .bind(at)
    .bind(session)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The action that taints `session` under `profile`, read on `conn`: the
/// one its row records. Every taint since `taint_complete` is recorded
/// with the commit that let its action run; for a session opened before
/// (`taint_complete` 0), whose record a crash may have lost, also the
/// first of its actions let run that reads untrusted content.
pub(crate) async fn taint_on(
    conn: &mut SqliteConnection,
    profile: &policy::Profile,
    session: &str,
) -> Result<Option<(String, String)>, StoreError> {
    let row: Option<(Option<String>, Option<String>, i64)> = sqlx::query_as(
        "SELECT tainted_by, taint_action, taint_complete FROM sessions WHERE id = ?",
    )
    .bind(session)
    .fetch_optional(&mut *conn)
    .await?;
    match row {
        Some((Some(by), what, _)) => return Ok(Some((by, what.unwrap_or_default()))),
        Some((None, _, complete)) if complete != 0 => return Ok(None),
        _ => {}
    }
    // Let run: allowed, or approved.
    let reads: Vec<(String, String)> = sqlx::query_as(
        "SELECT id, action_string FROM actions WHERE session = ? \
         AND status IN ('approved', 'running', 'completed', 'failed') ORDER BY id",
    )
    .bind(session)
    .fetch_all(&mut *conn)
    .await?;
    Ok(first_taint(profile, reads).map(|(id, s)| (id, taint_text(&s))))
}

/// [`guarded`], and its session tainted ([`taint_on`]), read on `conn`.
pub(crate) async fn held_by_taint_on(
    conn: &mut SqliteConnection,
    profile: &policy::Profile,
    action: &actiongate_api::model::Action,
) -> Result<bool, StoreError> {
    let Some(session) = action
        .session
        .as_deref()
        .filter(|_| guarded(profile, action))
    else {
        return Ok(false);
    };
    Ok(taint_on(conn, profile, session).await?.is_some())
}

impl SqliteStore {
    /// The action that taints `session` under `profile` ([`taint_on`]):
    /// its id and action string.
    pub async fn session_taint(
        &self,
        session: String,
        profile: Arc<policy::Profile>,
    ) -> Result<Option<(String, String)>, StoreError> {
        let mut conn = self.read.acquire().await?;
        taint_on(&mut conn, &profile, &session).await
    }

    /// Active grants for a session or a count of uses that may apply to
    /// `agent` acting on `tool` in `session` (none of another session's),
    /// in id order. Every session's are cached together until the next
    /// commit that may change grants (see `grant_cache`): taking a use is a
    /// commit, and re-checks the count, so a stale list never allows more.
    pub async fn scoped_grants(
        &self,
        agent: &str,
        session: Option<String>,
        tool: &str,
    ) -> Result<Vec<(policy::Grant, Option<i64>)>, StoreError> {
        let all = match self.grant_cache.get_scoped(agent, tool) {
            Ok(all) => all,
            Err(generation) => {
                let all = Arc::new(self.read_scoped_grants(agent, tool).await?);
                self.grant_cache
                    .insert_scoped(generation, agent, tool, all.clone());
                all
            }
        };
        crate::grant_cache::for_session(&all, session.as_deref(), &self.grant_cache)
    }

    /// Every session's scoped grants of (`agent`, `tool`) with a use left,
    /// from the database.
    async fn read_scoped_grants(&self, agent: &str, tool: &str) -> Result<Vec<Scoped>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            grant_columns!(),
            " FROM grants WHERE revoked_at IS NULL \
             AND (session IS NOT NULL OR uses_left IS NOT NULL) \
             AND (expires_at IS NULL OR expires_at > ?) AND (agent IS NULL OR agent = ?) \
             AND (handler = ? OR tool = ?) AND (uses_left IS NULL OR uses_left > 0) \
             ORDER BY id"
        ))
        .bind(to_ms(now()))
        .bind(agent)
        .bind(tool)
        .bind(tool)
        .fetch_all(&self.read)
        .await?;
        rows.iter().map(Scoped::from_row).collect()
    }

    /// Stores `new`, taking a use of its grant in the same transaction.
    pub(crate) async fn create_taking_use(
        &self,
        mut new: NewAction,
    ) -> Result<(actiongate_api::model::Action, bool), StoreError> {
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    // A retry of a stored request takes nothing.
                    let retry = match &new.idempotency_key {
                        Some(key) => sqlx::query_scalar::<_, i64>(
                            "SELECT 1 FROM actions WHERE agent = ? AND idempotency_key = ?",
                        )
                        .bind(&new.agent)
                        .bind(key)
                        .fetch_optional(&mut *conn)
                        .await?
                        .is_some(),
                        None => false,
                    };
                    if !retry {
                        lapsed_on(conn, &mut new).await?;
                        take_use_on(conn, &mut new).await?;
                    }
                    insert_on(conn, new).await
                })
            })
            .await
    }

    /// Stores `new`, allowed by grants read from the cache, after checking
    /// in the same transaction that each is still in force.
    pub(crate) async fn create_relying_on_grants(
        &self,
        mut new: NewAction,
    ) -> Result<(actiongate_api::model::Action, bool), StoreError> {
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    lapsed_on(conn, &mut new).await?;
                    insert_on(conn, new).await
                })
            })
            .await
    }
}
