//! Retention of records (`records.retention`): what is settled and older
//! than the cutoff is deleted, so a long-running daemon's database stays
//! bounded. Nothing that can still change is touched: a pending action,
//! grant request or plan, a running action, an active session or grant, a
//! delivery still being retried all stay, however old.
//!
//! Each kind is pruned in batches: the ids due are read (on a reader, so
//! the scan costs the writer nothing; ids are time-ordered, so only rows
//! made before the cutoff are looked at, through the primary key, and
//! sessions, whose ids agents choose, through an index of ended ones),
//! then deleted in one short write that checks again that each is still
//! due, with the rows that only refer to them (run claims, chat messages,
//! delivery attempts). The queries are built here once for both backends.

use sqlx::QueryBuilder;

/// The kinds of records retention deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Records {
    /// Settled actions (decided and, for a handler's, run or given up).
    Actions,
    /// Decided or expired grant requests.
    GrantRequests,
    /// Decided or expired plans.
    Plans,
    /// Ended sessions never tainted.
    Sessions,
    /// Ended sessions that were tainted, kept longer (their id reused is
    /// still tainted while kept): `records.tainted_sessions`.
    TaintedSessions,
    /// Revoked, expired or used-up grants.
    Grants,
    /// Webhook deliveries delivered or given up, with their attempts.
    Deliveries,
}

impl Records {
    /// Every kind, in the order retention prunes them.
    pub const ALL: [Records; 7] = [
        Records::Actions,
        Records::GrantRequests,
        Records::Plans,
        Records::Sessions,
        Records::TaintedSessions,
        Records::Grants,
        Records::Deliveries,
    ];

    /// The kind's name in logs.
    pub fn name(self) -> &'static str {
        match self {
            Records::TaintedSessions => "tainted_sessions",
            kind => kind.table(),
        }
    }

    /// The kind's table.
    fn table(self) -> &'static str {
        match self {
            Records::Actions => "actions",
            Records::GrantRequests => "grant_requests",
            Records::Plans => "plans",
            Records::Sessions | Records::TaintedSessions => "sessions",
            Records::Grants => "grants",
            Records::Deliveries => "deliveries",
        }
    }

    /// The rows that only refer to a record of this kind: (table, column,
    /// prefix of the record's id in that column).
    pub(crate) fn dependents(self) -> &'static [(&'static str, &'static str, &'static str)] {
        match self {
            Records::Actions => &[
                ("run_claims", "action_id", ""),
                ("connector_messages", "item", ""),
                ("connector_copies", "item", ""),
                ("connector_outbox", "item", ""),
            ],
            Records::GrantRequests => &[
                ("connector_messages", "item", "gr:"),
                ("connector_copies", "item", "gr:"),
                ("connector_outbox", "item", "gr:"),
            ],
            Records::Plans => &[
                ("connector_messages", "item", "pl:"),
                ("connector_copies", "item", "pl:"),
                ("connector_outbox", "item", "pl:"),
            ],
            Records::Deliveries => &[("delivery_attempts", "delivery_id", "")],
            Records::Sessions | Records::TaintedSessions | Records::Grants => &[],
        }
    }

    /// The least id a record of this kind made at `cutoff` (ms) can have:
    /// ids are UUIDv7 (time first), hyphenated for actions and deliveries,
    /// simple after a prefix for the others; `None` for sessions. A record
    /// settled before the cutoff was made before it, so its id is lower.
    fn id_bound(self, cutoff: i64) -> Option<String> {
        let ms = u64::try_from(cutoff.max(0)).unwrap_or(0);
        let mut bytes = [0u8; 16];
        bytes[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
        let id = uuid::Uuid::from_bytes(bytes);
        match self {
            Records::Actions | Records::Deliveries => Some(id.to_string()),
            Records::GrantRequests => Some(format!("grq_{}", id.simple())),
            Records::Plans => Some(format!("pln_{}", id.simple())),
            Records::Grants => Some(format!("grt_{}", id.simple())),
            Records::Sessions | Records::TaintedSessions => None,
        }
    }

    /// Adds the condition of a row of this kind retention may delete,
    /// settled before `cutoff` (ms).
    fn push_due<DB>(self, q: &mut QueryBuilder<DB>, cutoff: i64)
    where
        DB: sqlx::Database,
        for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    {
        match self {
            Records::Actions => {
                // Not those of a session opened before taints were
                // recorded on its row (migration 0019), and not recorded
                // since: its taint is read from its actions.
                q.push(
                    "(status IN ('completed', 'failed', 'denied', 'expired', 'cancelled') \
                     OR (handler IS NULL AND status = 'approved')) \
                     AND (session IS NULL OR NOT EXISTS (SELECT 1 FROM sessions s \
                       WHERE s.id = actions.session AND s.taint_complete = 0 \
                       AND s.tainted_by IS NULL)) \
                     AND COALESCE(settled_at, decided_at, created_at) < ",
                )
                .push_bind(cutoff);
            }
            Records::GrantRequests | Records::Plans => {
                q.push("status <> 'pending' AND COALESCE(decided_at, created_at) < ")
                    .push_bind(cutoff);
            }
            Records::Sessions | Records::TaintedSessions => {
                // Only one that nothing refers to any more: one with an
                // action left (a pending one would be tainted by its
                // approval), a grant not revoked, a pending grant request
                // (approving it must find the session ended, not open it
                // again with a grant), or a session naming it as its taint
                // carrier (a key's MCP session, which a taint recorded
                // there later must reach) is kept. A tainted one is a kind
                // of its own, kept longer (its id reused later, by a
                // runtime resuming its conversation, is still tainted);
                // an untainted one whose taint lives in its actions
                // (opened before migration 0019) is kept.
                q.push(if self == Records::Sessions {
                    "tainted_by IS NULL AND taint_complete = 1 AND "
                } else {
                    "tainted_by IS NOT NULL AND "
                })
                .push(
                    "ended_at IS NOT NULL \
                     AND NOT EXISTS (SELECT 1 FROM actions a WHERE a.session = sessions.id) \
                     AND NOT EXISTS (SELECT 1 FROM grants g \
                       WHERE g.session = sessions.id AND g.revoked_at IS NULL) \
                     AND NOT EXISTS (SELECT 1 FROM grant_requests r \
                       WHERE r.session = sessions.id AND r.status = 'pending') \
                     AND NOT EXISTS (SELECT 1 FROM sessions c WHERE c.carrier = sessions.id) \
                     AND ended_at < ",
                )
                .push_bind(cutoff);
            }
            Records::Grants => {
                q.push("((revoked_at IS NOT NULL AND revoked_at < ")
                    .push_bind(cutoff)
                    .push(") OR (expires_at IS NOT NULL AND expires_at < ")
                    .push_bind(cutoff)
                    // Used up: since its last use, or (used up before
                    // migration 0022 recorded that) since granted.
                    .push(
                        ") OR (uses_left IS NOT NULL AND uses_left <= 0 \
                           AND COALESCE(spent_at, granted_at) < ",
                    )
                    .push_bind(cutoff)
                    .push("))");
            }
            Records::Deliveries => {
                q.push("status <> 'pending' AND COALESCE(finished_at, created_at) < ")
                    .push_bind(cutoff);
            }
        }
    }
}

/// `SELECT id` of up to `limit` records of `kind` due before `cutoff`.
pub(crate) fn due_ids<DB>(kind: Records, cutoff: i64, limit: i64) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q = QueryBuilder::new(format!("SELECT id FROM {} WHERE ", kind.table()));
    if let Some(bound) = kind.id_bound(cutoff) {
        q.push("id < ").push_bind(bound).push(" AND ");
    }
    kind.push_due(&mut q, cutoff);
    q.push(" LIMIT ").push_bind(limit);
    q
}

/// Deletes those of `ids` still due, returning the ids deleted.
pub(crate) fn delete_due<DB>(kind: Records, cutoff: i64, ids: &[String]) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q = QueryBuilder::new(format!("DELETE FROM {} WHERE id IN (", kind.table()));
    let mut list = q.separated(", ");
    for id in ids {
        list.push_bind(id.clone());
    }
    q.push(") AND ");
    kind.push_due(&mut q, cutoff);
    q.push(" RETURNING id");
    q
}

/// Deletes the rows of `table` whose `column` names one of `ids` (with
/// `prefix`).
pub(crate) fn delete_dependents<DB>(
    (table, column, prefix): (&str, &str, &str),
    ids: &[String],
) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q = QueryBuilder::new(format!("DELETE FROM {table} WHERE {column} IN ("));
    let mut list = q.separated(", ");
    for id in ids {
        list.push_bind(format!("{prefix}{id}"));
    }
    q.push(")");
    q
}

/// How long rate rows are kept: every rate limit counts the last hour.
pub const RATE_WINDOW: chrono::Duration = chrono::Duration::hours(1);

/// Rows kept for a while only: rate rows past [`RATE_WINDOW`], and chat
/// interactions seen before the cutoff (deleted with `?` the cutoff).
pub(crate) const STALE: [&str; 2] = [
    "DELETE FROM rate_events WHERE at < ",
    "DELETE FROM connector_seen WHERE seen_at < ",
];

impl crate::SqliteStore {
    /// Deletes up to `limit` records of `kind` settled before `cutoff`, with
    /// the rows that only refer to them; how many records.
    pub async fn prune_records(
        &self,
        kind: Records,
        cutoff: chrono::DateTime<chrono::Utc>,
        limit: i64,
    ) -> Result<u64, crate::StoreError> {
        let cutoff = crate::time::to_ms(cutoff);
        let ids: Vec<String> = due_ids::<sqlx::Sqlite>(kind, cutoff, limit)
            .build_query_scalar()
            .fetch_all(&self.read)
            .await?;
        if ids.is_empty() {
            return Ok(0);
        }
        // Through `run`, which renews the grant cache after: deleting
        // revoked or expired grants leaves the active ones as they were,
        // but nothing here assumes so.
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    if kind == Records::Actions {
                        crate::event_ref::write_out(&mut *conn, &ids).await?;
                    }
                    let gone: Vec<String> = delete_due::<sqlx::Sqlite>(kind, cutoff, &ids)
                        .build_query_scalar()
                        .fetch_all(&mut *conn)
                        .await?;
                    if !gone.is_empty() {
                        for &dependent in kind.dependents() {
                            delete_dependents::<sqlx::Sqlite>(dependent, &gone)
                                .build()
                                .execute(&mut *conn)
                                .await?;
                        }
                    }
                    Ok(gone.len() as u64)
                })
            })
            .await
    }

    /// Deletes rate rows older than [`RATE_WINDOW`] before `now`, and chat
    /// interactions seen before `cutoff`; how many rows.
    pub async fn prune_stale(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        cutoff: chrono::DateTime<chrono::Utc>,
    ) -> Result<u64, crate::StoreError> {
        let before = [
            crate::time::to_ms(now - RATE_WINDOW),
            crate::time::to_ms(cutoff),
        ];
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let mut n = 0;
                    for (sql, at) in STALE.iter().zip(before) {
                        n += QueryBuilder::<sqlx::Sqlite>::new(*sql)
                            .push_bind(at)
                            .build()
                            .execute(&mut *conn)
                            .await?
                            .rows_affected();
                    }
                    Ok(n)
                })
            })
            .await
    }
}
