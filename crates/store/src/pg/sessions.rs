//! Grants scoped to a session or a count of uses, on Postgres (see
//! `crate::sessions`). A use is taken by a compare-and-set on the grant's
//! row in the transaction that stores the action: the row lock orders
//! concurrent takers on every daemon, and each re-reads `uses_left` once
//! it holds the lock, so a grant of `n` uses allows exactly `n`.

use actiongate_policy as policy;
use sqlx::PgConnection;

use crate::actions::NewAction;
use crate::error::StoreError;
use crate::grants::{from_row, grant_columns, to_policy};
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
    let taken = sqlx::query(
        "UPDATE grants SET uses_left = uses_left - 1 WHERE id = $1 AND uses_left > 0 \
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

impl Postgres {
    /// Active grants for a session or a count of uses that may apply to
    /// `agent` acting on `tool` in `session`; never cached.
    pub async fn scoped_grants(
        &self,
        agent: &str,
        session: Option<String>,
        tool: &str,
    ) -> Result<Vec<(policy::Grant, Option<i64>)>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            grant_columns!(),
            " FROM grants WHERE revoked_at IS NULL \
             AND (session IS NOT NULL OR uses_left IS NOT NULL) \
             AND (expires_at IS NULL OR expires_at > $1) AND (agent IS NULL OR agent = $2) \
             AND (handler = $3 OR tool = $3) AND (uses_left IS NULL OR uses_left > 0) \
             AND (session IS NULL OR session = $4) ORDER BY id"
        ))
        .bind(to_ms(now()))
        .bind(agent)
        .bind(tool)
        .bind(session)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| from_row(r).and_then(|g| Ok((to_policy(&g)?, g.uses_left))))
            .collect()
    }
}
