//! Grants scoped to a session or a count of uses, on Postgres (see
//! `crate::sessions`). A use is taken by a compare-and-set on the grant's
//! row in the transaction that stores the action: the row lock orders
//! concurrent takers on every daemon, and each re-reads `uses_left` once
//! it holds the lock, so a grant of `n` uses allows exactly `n`.

use std::sync::Arc;

use actiongate_policy as policy;
use sqlx::PgConnection;

use crate::actions::NewAction;
use crate::error::StoreError;
use crate::grant_cache::Scoped;
use crate::grants::grant_columns;
use crate::pg::Postgres;
use crate::sessions::used_up;
use crate::time::{now, to_ms};

/// Takes one use of `new.take_use` on `conn`, or turns `new` into an asked
/// action when none is left.
pub(crate) async fn take_use_on(
    conn: &mut PgConnection,
    new: &mut NewAction,
) -> Result<(), StoreError> {
    let Some(grant) = new.take_use.clone() else {
        return Ok(());
    };
    // The last use marks when the grant was used up, for retention.
    let taken = sqlx::query(
        "UPDATE grants SET uses_left = uses_left - 1, \
         spent_at = CASE WHEN uses_left = 1 THEN $2 ELSE spent_at END \
         WHERE id = $1 AND uses_left > 0 \
         AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)",
    )
    .bind(&grant)
    .bind(to_ms(now()))
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if taken == 0 {
        used_up(new, &grant);
    }
    Ok(())
}

/// See [`crate::sessions::mark_taint_on`].
pub(crate) async fn mark_taint_on(
    conn: &mut PgConnection,
    action: &actiongate_api::model::Action,
) -> Result<(), StoreError> {
    match &action.session {
        Some(session) => record_taint_on(conn, session, &action.id, &action.action_string).await,
        None => Ok(()),
    }
}

/// See [`crate::sessions::record_taint_on`].
pub(crate) async fn record_taint_on(
    conn: &mut PgConnection,
    session: &str,
    action_id: &str,
    action_string: &str,
) -> Result<(), StoreError> {
    let what = crate::sessions::taint_text(action_string);
    let at = to_ms(now());
    sqlx::query(
        "UPDATE sessions SET tainted_by = COALESCE(tainted_by, $1), \
         taint_action = COALESCE(taint_action, $2), \
         tainted_at = CASE WHEN tainted_by IS NULL \
           OR id = (SELECT carrier FROM sessions WHERE id = $4) THEN $3 ELSE tainted_at END \
         WHERE id IN ($4, (SELECT carrier FROM sessions WHERE id = $4))",
    )
    .bind(action_id)
    .bind(&what)
    .bind(at)
    .bind(session)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// See [`crate::sessions::taint_on`].
pub(crate) async fn taint_on(
    conn: &mut PgConnection,
    profile: &policy::Profile,
    session: &str,
) -> Result<Option<(String, String)>, StoreError> {
    let row: Option<(Option<String>, Option<String>, i16)> = sqlx::query_as(
        "SELECT tainted_by, taint_action, taint_complete FROM sessions WHERE id = $1",
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
        "SELECT id, action_string FROM actions WHERE session = $1 \
         AND status IN ('approved', 'running', 'completed', 'failed') ORDER BY id",
    )
    .bind(session)
    .fetch_all(&mut *conn)
    .await?;
    Ok(crate::sessions::first_taint(profile, reads)
        .map(|(id, s)| (id, crate::sessions::taint_text(&s))))
}

/// [`crate::sessions::guarded`], and its session tainted ([`taint_on`]),
/// read on `conn`.
pub(crate) async fn held_by_taint_on(
    conn: &mut PgConnection,
    profile: &policy::Profile,
    action: &actiongate_api::model::Action,
) -> Result<bool, StoreError> {
    let Some(session) = action
        .session
        .as_deref()
        .filter(|_| crate::sessions::guarded(profile, action))
    else {
        return Ok(false);
    };
    Ok(taint_on(conn, profile, session).await?.is_some())
}

impl Postgres {
    /// See [`crate::SqliteStore::session_taint`].
    pub async fn session_taint(
        &self,
        session: String,
        profile: std::sync::Arc<policy::Profile>,
    ) -> Result<Option<(String, String)>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        taint_on(&mut conn, &profile, &session).await
    }

    /// Active grants for a session or a count of uses that may apply to
    /// `agent` acting on `tool` in `session` (none of another session's),
    /// in id order. Every session's are cached together as
    /// [`Postgres::active_grants`] caches the others (while the tail
    /// follows, until a grant event or the next second), and a use taken
    /// on this node clears them. A count read before another node took a
    /// use can only make an action ask: the use is taken by a
    /// compare-and-set that re-reads it (`take_use_on`).
    pub async fn scoped_grants(
        &self,
        agent: &str,
        session: Option<String>,
        tool: &str,
    ) -> Result<Vec<(policy::Grant, Option<i64>)>, StoreError> {
        let following = self.grant_cache_usable();
        let all = match self.grants.get_scoped(agent, tool) {
            Ok(all) if following => all,
            cached => {
                let all = Arc::new(self.read_scoped_grants(agent, tool).await?);
                if let (Err(generation), true) = (cached, following) {
                    self.grants
                        .insert_scoped(generation, agent, tool, all.clone());
                }
                all
            }
        };
        crate::grant_cache::for_session(&all, session.as_deref(), &self.grants)
    }

    /// Every session's scoped grants of (`agent`, `tool`) with a use left.
    async fn read_scoped_grants(&self, agent: &str, tool: &str) -> Result<Vec<Scoped>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            grant_columns!(),
            " FROM grants WHERE revoked_at IS NULL \
             AND (session IS NOT NULL OR uses_left IS NOT NULL) \
             AND (expires_at IS NULL OR expires_at > $1) AND (agent IS NULL OR agent = $2) \
             AND (handler = $3 OR tool = $3) AND (uses_left IS NULL OR uses_left > 0) \
             ORDER BY id"
        ))
        .bind(to_ms(now()))
        .bind(agent)
        .bind(tool)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(Scoped::from_row).collect()
    }
}
