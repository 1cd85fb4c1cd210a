//! The pending actions a new grant may cover, looked through before the
//! grant is stored, outside the writer (SQLite) or the transaction holding
//! the grants lock (Postgres).
//!
//! Creating a grant approves every pending action it covers, and judging
//! whether it covers one parses the action's detail (a shell line) or
//! params. Done while writing, with 10,000 actions of one tool pending,
//! every other write (SQLite) or every action that asks (Postgres) waited
//! 70-80 ms per grant. Now a read snapshot is looked through first, and
//! the write reads only the actions found covered there and those the
//! snapshot did not hold, and judges them again with everything else, as
//! before: on SQLite those asked after it (each is stored with its
//! `action.enqueued` event, whose `seq` is above every seq the snapshot
//! held); on Postgres those not among the ids it held. The look reads a
//! page at a time ([`LOOK_PAGE`]), so a queue of any length costs it a
//! page of rows and two ids per action in memory.
//!
//! Nothing can be missed: what makes a grant cover an action (its agent,
//! tool, detail, handler, permission, scope and call) does not change while
//! it is pending, a grant that does not cover it at the snapshot's time
//! covers it no later (time only expires things), and an action becomes
//! pending only when it is stored.

use actiongate_policy as policy;
use sqlx::{QueryBuilder, Sqlite};

use crate::SqliteStore;
use crate::actions;
use crate::error::StoreError;
use crate::grants::{NewGrant, NewGrantTarget, covers};
use crate::row::Cols;
use crate::time::now;
use actiongate_api::model::GrantRecord;

/// Which pending actions the write looks at for a new grant.
#[derive(Debug, Clone)]
pub(crate) enum Candidates {
    /// Every pending action the grant may reach (nothing looked through
    /// before).
    All,
    /// SQLite: those found covered in a snapshot, and every action asked
    /// after it.
    Since {
        /// The highest event `seq` in the snapshot.
        mark: i64,
        /// The ids found covered, as a JSON array.
        covered: String,
    },
    /// Postgres: those found covered in a snapshot, and every action it did
    /// not hold.
    Unseen {
        /// The ids found covered.
        covered: Vec<String>,
        /// Every id it held.
        seen: Vec<String>,
    },
}

/// The grant `new` will be, as the policy judges it; `None` when it
/// approves no pending action (one for a session or a count).
pub(crate) fn draft(new: &NewGrant) -> Result<Option<policy::Grant>, StoreError> {
    if new.is_scoped() {
        return Ok(None);
    }
    Ok(Some(policy::Grant {
        id: new.id.clone(),
        agent: new.agent.clone(),
        target: new.target.clone().into_policy()?,
        expires_at: new.expires_at,
        revoked_at: None,
    }))
}

/// Pending actions read and judged at a time: a look through a queue of
/// any length holds at most this many rows, plus two ids per action.
pub(crate) const LOOK_PAGE: usize = 500;

/// A look through the pending actions a new grant may reach, a page
/// ([`LOOK_PAGE`]) at a time in id order: [`Look::query`] the next page,
/// [`Look::judge`] it, until the query is `None`.
pub(crate) struct Look<'a> {
    grant: policy::Grant,
    reach: &'a NewGrant,
    /// The ids of those it covers now.
    pub(crate) covered: Vec<String>,
    /// The ids of every one judged.
    pub(crate) seen: Vec<String>,
    /// The last page was short: nothing more to read.
    done: bool,
}

impl<'a> Look<'a> {
    /// A look for `new`; `None` when it approves no pending action (one
    /// for a session or a count) or names no target.
    pub(crate) fn new(new: &'a NewGrant) -> Result<Option<Look<'a>>, StoreError> {
        Ok(draft(new)?.map(|grant| Look {
            grant,
            reach: new,
            covered: Vec::new(),
            seen: Vec::new(),
            done: false,
        }))
    }

    /// The query for the next page; `None` once all are judged.
    pub(crate) fn query<DB>(&self) -> Option<QueryBuilder<DB>>
    where
        DB: sqlx::Database,
        for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
        for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    {
        if self.done {
            return None;
        }
        let after = self.seen.last().cloned();
        let mut q = covered_query_among::<DB>(self.reach.into(), None, |q| {
            if let Some(after) = after {
                q.push(" AND id > ").push_bind(after);
            }
        })?;
        q.push(" LIMIT ").push_bind(LOOK_PAGE as i64);
        Some(q)
    }

    /// Judges a page `rows` read by [`Look::query`] on a blocking thread
    /// (thousands of shell lines are CPU work); `false` when that thread
    /// failed: the write then looks through them all, as it used to.
    pub(crate) async fn judge<R>(&mut self, rows: Vec<R>) -> Result<bool, StoreError>
    where
        R: Cols + Send + 'static,
    {
        self.done = rows.len() < LOOK_PAGE;
        let grant = self.grant.clone();
        let judged = tokio::task::spawn_blocking(move || {
            let at = now();
            let (mut covered, mut seen) = (Vec::new(), Vec::with_capacity(rows.len()));
            for row in &rows {
                let action = actions::from_row(row)?;
                if covers(&grant, &action, at) {
                    covered.push(action.id.clone());
                }
                seen.push(action.id);
            }
            Ok::<_, StoreError>((covered, seen))
        })
        .await;
        match judged {
            Ok(ids) => {
                let (covered, seen) = ids?;
                self.covered.extend(covered);
                self.seen.extend(seen);
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }
}

impl SqliteStore {
    /// Looks through the pending actions `new` may reach on a read
    /// connection.
    pub(crate) async fn pending_covered(&self, new: &NewGrant) -> Result<Candidates, StoreError> {
        let Some(mut look) = Look::new(new)? else {
            return Ok(Candidates::All);
        };
        // One snapshot for all pages: an action it lacks was asked after
        // `mark`.
        let mut tx = self.read.begin().await?;
        let mark: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM events")
            .fetch_one(&mut *tx)
            .await?;
        while let Some(mut q) = look.query::<Sqlite>() {
            let rows = q.build().fetch_all(&mut *tx).await?;
            if !look.judge(rows).await? {
                return Ok(Candidates::All);
            }
        }
        tx.rollback().await?;
        Ok(Candidates::Since {
            mark,
            covered: serde_json::to_string(&look.covered)?,
        })
    }
}

/// The SQLite query for the pending actions `reach` may cover among
/// `candidates`, in id order; `None` when it names no target.
pub(crate) fn candidates_query(
    reach: Reach<'_>,
    candidates: &Candidates,
) -> Option<QueryBuilder<Sqlite>> {
    covered_query_among::<Sqlite>(reach, None, |q| {
        if let Candidates::Since { mark, covered } = candidates {
            q.push(" AND (id IN (SELECT value FROM json_each(")
                .push_bind(covered.clone())
                .push(")) OR id IN (SELECT action_id FROM events WHERE seq > ")
                .push_bind(*mark)
                .push(" AND type = 'action.enqueued'))");
        }
    })
}

/// What a grant may cover, as the query for candidates sees it.
pub(crate) struct Reach<'a> {
    agent: Option<&'a str>,
    handler: Option<&'a str>,
    permission: Option<&'a str>,
    tool: Option<&'a str>,
}

impl<'a> From<&'a GrantRecord> for Reach<'a> {
    fn from(g: &'a GrantRecord) -> Reach<'a> {
        Reach {
            agent: g.agent.as_deref(),
            handler: g.handler.as_deref(),
            permission: g.permission.as_deref(),
            tool: g.tool.as_deref(),
        }
    }
}

impl<'a> From<&'a NewGrant> for Reach<'a> {
    fn from(g: &'a NewGrant) -> Reach<'a> {
        let (handler, permission, tool) = match &g.target {
            NewGrantTarget::Permission {
                handler,
                permission,
                ..
            } => (Some(handler.as_str()), Some(permission.as_str()), None),
            NewGrantTarget::Tool { tool, .. } => (None, None, Some(tool.as_str())),
        };
        Reach {
            agent: g.agent.as_deref(),
            handler,
            permission,
            tool,
        }
    }
}

/// The query for the pending actions a grant may cover (the policy judges
/// each), narrowed by what `narrow` adds to their conditions, and action
/// `also` when given, in id order; `None` when the grant names no target.
pub(crate) fn covered_query_among<DB>(
    reach: Reach<'_>,
    also: Option<&str>,
    narrow: impl FnOnce(&mut QueryBuilder<DB>),
) -> Option<QueryBuilder<DB>>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q: QueryBuilder<DB> = QueryBuilder::new(concat!(
        "SELECT ",
        actions::action_columns!(),
        " FROM actions WHERE "
    ));
    if let Some(id) = also {
        q.push("id = ").push_bind(id.to_owned()).push(" OR ");
    }
    q.push("(status = 'pending'");
    match (reach.handler, reach.permission, reach.tool) {
        (Some(h), Some(p), _) => {
            q.push(" AND handler = ").push_bind(h.to_owned());
            q.push(" AND permission = ").push_bind(p.to_owned());
        }
        (_, _, Some(tool)) => {
            q.push(" AND handler IS NULL AND tool = ")
                .push_bind(tool.to_owned());
        }
        _ => return None,
    }
    if let Some(agent) = reach.agent {
        q.push(" AND agent = ").push_bind(agent.to_owned());
    }
    narrow(&mut q);
    q.push(") ORDER BY id");
    Some(q)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use actiongate_api::model::ActionStatus;

    use super::*;
    use crate::test_support::new_action;
    use crate::{DecisionResult, StoreOptions};

    fn grant(pattern: &str) -> NewGrant {
        NewGrant {
            session: None,
            uses: None,
            id: uuid::Uuid::now_v7().to_string(),
            agent: None,
            target: NewGrantTarget::Tool {
                tool: "bash".to_owned(),
                pattern: pattern.to_owned(),
                whole_line: false,
            },
            granted_by: "op".to_owned(),
            expires_at: None,
            note: None,
        }
    }

    #[tokio::test]
    async fn an_action_asked_after_the_look_is_judged_by_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions {
            default_profile: Some(Arc::new(policy::get_preset("guarded").unwrap())),
            ..StoreOptions::default()
        };
        let store = SqliteStore::open(&dir.path().join("t.db"), opts)
            .await
            .unwrap();
        let ask = |n| new_action(n, "a".to_owned(), DecisionResult::Ask);
        // `echo 1` and `echo 2` before the look, `echo 3` and `echo 4`
        // after it; the grant covers the odd ones.
        let (before, _) = store.insert_action(ask(1)).await.unwrap();
        let (before_not, _) = store.insert_action(ask(2)).await.unwrap();
        let new = grant("echo [13]");
        let candidates = store.pending_covered(&new).await.unwrap();
        let Candidates::Since { covered, .. } = &candidates else {
            panic!("{candidates:?}");
        };
        assert_eq!(covered, &serde_json::to_string(&[&before.id]).unwrap());
        let (after, _) = store.insert_action(ask(3)).await.unwrap();
        let (after_not, _) = store.insert_action(ask(4)).await.unwrap();

        let profile = store.default_profile.clone();
        let created = store
            .writer
            .run(move |conn| {
                Box::pin(async move {
                    crate::grants::create_on(conn, new, None, None, profile.as_ref(), &candidates)
                        .await
                })
            })
            .await
            .unwrap();
        let approved: Vec<&str> = created.approved.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(approved, [before.id.as_str(), after.id.as_str()]);
        for (id, status) in [
            (&before.id, ActionStatus::Approved),
            (&after.id, ActionStatus::Approved),
            (&before_not.id, ActionStatus::Pending),
            (&after_not.id, ActionStatus::Pending),
        ] {
            assert_eq!(store.get_action(id).await.unwrap().status, status, "{id}");
        }
    }
}
