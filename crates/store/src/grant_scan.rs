//! The pending actions a new grant may cover, looked through on a read
//! connection before the writer stores the grant (SQLite).
//!
//! Creating a grant approves every pending action it covers, and judging
//! whether it covers one parses its detail (a shell line) or params. Done
//! in the writer, with 10,000 actions of one tool pending, that held every
//! other write for about 66 ms per grant. Now a read snapshot is looked
//! through first; the writer reads only the actions found covered there,
//! and those asked after the snapshot (each is stored with its
//! `action.enqueued` event, whose `seq` is above every seq the snapshot
//! held), and judges them again, with everything else, as before.
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
use crate::grants::{NewGrant, NewGrantTarget, Reach, covered_query, covered_where, covers};
use crate::time::now;

/// Which pending actions the writer looks at for a new grant.
#[derive(Debug, Clone)]
pub(crate) enum Candidates {
    /// Every pending action the grant may reach (nothing looked through
    /// before).
    All,
    /// Those found covered in a snapshot, and every action asked after it.
    Seen {
        /// The highest event `seq` in the snapshot.
        mark: i64,
        /// The ids found covered, as a JSON array.
        ids: String,
    },
}

impl SqliteStore {
    /// Looks through the pending actions `new` may reach on a read
    /// connection. A grant for a session or a count approves none of them,
    /// and one without a target none either: nothing is read for those.
    pub(crate) async fn pending_covered(&self, new: &NewGrant) -> Result<Candidates, StoreError> {
        let Some(mut q) = covered_query::<Sqlite>(new.into(), None) else {
            return Ok(Candidates::All);
        };
        if new.is_scoped() {
            return Ok(Candidates::All);
        }
        let grant = draft(new)?;
        // One snapshot for both: an action it lacks was asked after `mark`.
        let mut tx = self.read.begin().await?;
        let mark: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM events")
            .fetch_one(&mut *tx)
            .await?;
        let rows = q.build().fetch_all(&mut *tx).await?;
        tx.rollback().await?;
        // Judging thousands of shell lines is CPU work: off the runtime. If
        // that fails, the writer looks through them all, as it used to.
        let judged = tokio::task::spawn_blocking(move || -> Result<String, StoreError> {
            let at = now();
            let mut ids = Vec::new();
            for row in &rows {
                let action = actions::from_row(row)?;
                if covers(&grant, &action, at) {
                    ids.push(action.id);
                }
            }
            Ok(serde_json::to_string(&ids)?)
        })
        .await;
        let Ok(ids) = judged else {
            return Ok(Candidates::All);
        };
        let ids = ids?;
        Ok(Candidates::Seen { mark, ids })
    }
}

/// The query for the pending actions `reach` may cover, narrowed to
/// `candidates`, in id order; `None` when it names no target.
pub(crate) fn candidates_query(
    reach: Reach<'_>,
    candidates: &Candidates,
) -> Option<QueryBuilder<Sqlite>> {
    let mut q = covered_where::<Sqlite>(reach, None)?;
    if let Candidates::Seen { mark, ids } = candidates {
        q.push(" AND (id IN (SELECT value FROM json_each(")
            .push_bind(ids.clone())
            .push(")) OR id IN (SELECT action_id FROM events WHERE seq > ")
            .push_bind(*mark)
            .push(" AND type = 'action.enqueued'))");
    }
    q.push(" ORDER BY id");
    Some(q)
}

/// The grant `new` will be, as the policy judges it.
fn draft(new: &NewGrant) -> Result<policy::Grant, StoreError> {
    let target = match &new.target {
        NewGrantTarget::Permission {
            handler,
            permission,
            scope,
        } => policy::GrantTarget::Permission {
            handler: handler.clone(),
            permission: permission.clone(),
            scope: scope.clone(),
        },
        NewGrantTarget::Tool {
            tool,
            pattern,
            whole_line,
        } => policy::GrantTarget::Tool(
            if *whole_line {
                policy::ToolPattern::whole_line(tool, pattern)
            } else {
                policy::ToolPattern::new(tool, pattern)
            }
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        ),
    };
    Ok(policy::Grant {
        id: new.id.clone(),
        agent: new.agent.clone(),
        target,
        expires_at: new.expires_at,
        revoked_at: None,
    })
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
        let Candidates::Seen { ids, .. } = &candidates else {
            panic!("{candidates:?}");
        };
        assert_eq!(ids, &serde_json::to_string(&[&before.id]).unwrap());
        let (after, _) = store.insert_action(ask(3)).await.unwrap();
        let (after_not, _) = store.insert_action(ask(4)).await.unwrap();

        let profile = store.default_profile.clone();
        let created = store
            .writer
            .run(move |conn| {
                Box::pin(async move {
                    crate::grants::create_on(conn, new, None, profile.as_ref(), &candidates).await
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
