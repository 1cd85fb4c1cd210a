//! The writer's batch helpers: the one-hand-off path for batches of
//! prepared writes, and ending a batch early (rollback, the jobs not
//! reached).

use super::*;

/// A batch of prepared writes only is written and committed in one hand-off.
/// `None` (and `batch` untouched, nothing written) when the batch holds other
/// work or that failed; the caller then goes the long way, which isolates
/// failures. A locked or full database fails the whole batch at once
/// instead: going the long way would only wait out another busy timeout.
pub(super) async fn quick_only(
    conn: &mut SqliteConnection,
    batch: &mut Vec<Queued>,
) -> Option<(Vec<Outcome>, Result<(), Fault>)> {
    if !batch.iter().all(|q| matches!(q, Queued::Quick(_))) {
        return None;
    }
    let mut group: Vec<Quick> = batch
        .drain(..)
        .filter_map(|q| match q {
            Queued::Quick(job) => Some(job),
            Queued::Job(_) => None,
        })
        .collect();
    match write_group_on(conn, &mut group, Wrap::Transaction).await {
        Ok(()) => Some((
            group
                .into_iter()
                .map(|j| Outcome::Quick(j, Ok(())))
                .collect(),
            Ok(()),
        )),
        Err(e @ (StoreError::Busy | StoreError::Full)) => {
            rollback(conn).await;
            let fault = if matches!(e, StoreError::Full) {
                Fault::Full
            } else {
                Fault::Busy
            };
            let done = group
                .into_iter()
                .map(|j| Outcome::Quick(j, Ok(())))
                .collect();
            Some((done, Err(fault)))
        }
        Err(e) => {
            tracing::debug!(error = %e, size = group.len(), "batch of new actions failed; retrying job by job");
            // The transaction may be open (an insert failed) or not (BEGIN
            // or COMMIT failed); either way nothing of it stands.
            rollback(conn).await;
            batch.extend(group.into_iter().map(Queued::Quick));
            None
        }
    }
}

/// Ends the batch after a failed savepoint statement: the transaction is
/// rolled back and nothing in it stands.
pub(super) async fn abort(
    conn: &mut SqliteConnection,
    mut done: Vec<Outcome>,
    current: Outcome,
    queue: impl Iterator<Item = Queued>,
    e: Fault,
) -> (Vec<Outcome>, Result<(), Fault>) {
    rollback(conn).await;
    done.push(current);
    drain_into(&mut done, queue);
    (done, Err(e))
}

/// The jobs not reached when a batch ended early.
pub(super) fn drain_into(done: &mut Vec<Outcome>, queue: impl Iterator<Item = Queued>) {
    done.extend(queue.map(|q| match q {
        Queued::Job(job) => Outcome::Job(job),
        Queued::Quick(job) => Outcome::Quick(job, Ok(())),
    }));
}

pub(super) async fn exec(conn: &mut SqliteConnection, sql: &'static str) -> Result<(), Fault> {
    sqlx::raw_sql(sql)
        .execute(&mut *conn)
        .await
        .map(|_| ())
        .map_err(|e| Fault::of_sqlx(&e))
}

/// Rolls back whatever transaction is open. SQLite has already rolled back
/// by itself after some errors (a full disk, a failed `BEGIN`), and sqlx
/// cannot ask whether one is open: that answer is no failure.
pub(super) async fn rollback(conn: &mut SqliteConnection) {
    if let Err(e) = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await {
        let none_open = matches!(&e, sqlx::Error::Database(db)
            if db.message().contains("no transaction is active"));
        if !none_open {
            tracing::error!(error = %e, "rollback failed");
        }
    }
}
