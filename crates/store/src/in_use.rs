//! Whether a program of an older version still uses the database when this
//! one is about to migrate it. A daemon of a version before sessions and
//! counted grants, serving beside a migrated schema, would go on allowing
//! every use of a counted grant and ignore a grant's session (upgrade
//! review). So pending migrations are applied only once such programs
//! are gone.
//!
//! SQLite: any other process with the database open in WAL mode holds a
//! shared POSIX lock on the database file for as long as it keeps it open;
//! `/proc/locks` lists it with its process id. (Asked there, not with
//! `F_GETLK`: opening and closing the file here to ask would drop every
//! lock this process's own SQLite connections hold on it.)
//! Postgres: daemons name their connections `actiongate m<N>`, `N` the
//! last migration they know; a connection to the same database named so
//! with a lower `N`, or with no name (versions before the names, and any
//! client that gives none), is one that might be an older daemon.

use std::path::Path;

use sqlx::PgPool;

use crate::StoreError;

/// The start of the application name of a daemon's Postgres connections.
pub const APP_NAME: &str = "actiongate m";

/// The id of another process that holds a lock on the SQLite database at
/// `path` (has it open), if one does and `/proc/locks` says so.
pub(crate) fn sqlite_user(path: &Path) -> Result<Option<i32>, StoreError> {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::Backend(sqlx::Error::Io(e))),
    };
    let Ok(locks) = std::fs::read_to_string("/proc/locks") else {
        return Ok(None);
    };
    Ok(lock_holder(
        &locks,
        meta.dev(),
        meta.ino(),
        std::process::id(),
    ))
}

/// The process, other than `me`, holding a POSIX lock in `locks` (the text
/// of `/proc/locks`) on the file `ino` of device `dev`.
fn lock_holder(locks: &str, dev: u64, ino: u64, me: u32) -> Option<i32> {
    // As the kernel prints it: MAJOR:MINOR:INODE, the numbers in hex.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let file = format!("{major:02x}:{minor:02x}:{ino}");
    locks.lines().find_map(|line| {
        let mut f = line.split_whitespace().skip(1);
        let (kind, pid, at) = (f.next()?, f.nth(2)?, f.next()?);
        let pid: i32 = pid.parse().ok()?;
        (kind == "POSIX" && at == file && pid > 0 && pid.cast_unsigned() != me).then_some(pid)
    })
}

/// The last migration the SQLite database on `conn` has (0: none).
pub(crate) async fn sqlite_applied(conn: &mut sqlx::SqliteConnection) -> Result<i64, StoreError> {
    let table: Option<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_optional(&mut *conn)
    .await?;
    if table.is_none() {
        return Ok(0);
    }
    Ok(sqlx::query_scalar(
        "SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success = 1",
    )
    .fetch_one(&mut *conn)
    .await?)
}

/// The last migration the Postgres database of `pool` has (0: none).
pub(crate) async fn pg_applied(pool: &PgPool) -> Result<i64, StoreError> {
    let known: Option<String> = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations')::text")
        .fetch_one(pool)
        .await?;
    if known.is_none() {
        return Ok(0);
    }
    Ok(
        sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success")
            .fetch_one(pool)
            .await?,
    )
}

/// Logs that migrations `from`..=`to` were applied, when there were any.
pub(crate) fn log_migrated(from: i64, to: i64) {
    if from < to {
        tracing::info!(from, to, "database migrated");
    }
}

/// Refuses to migrate the SQLite database at `path` while another process
/// has it open.
pub(crate) fn refuse_sqlite(path: &Path) -> Result<(), StoreError> {
    match sqlite_user(path)? {
        None => Ok(()),
        Some(pid) => Err(StoreError::Conflict(format!(
            "the database needs migrating, and another process (pid {pid}) has it open: if it \
             is an older actiongate, stop it first, since it would ignore what the new schema \
             adds (docs/operations.md)"
        ))),
    }
}

/// The names of the other connections to the Postgres database of `pool`
/// that might be daemons older than migration `latest` (`""` for one that
/// gives no name).
pub(crate) async fn pg_older_users(pool: &PgPool, latest: i64) -> Result<Vec<String>, StoreError> {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT COALESCE(application_name, '') FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid() \
         AND backend_type = 'client backend'",
    )
    .fetch_all(pool)
    .await?;
    Ok(names
        .into_iter()
        .filter(|name| older(name, latest))
        .collect())
}

/// Whether a connection named `name` may be a daemon older than `latest`.
fn older(name: &str, latest: i64) -> bool {
    match name.strip_prefix(APP_NAME) {
        Some(n) => n.parse::<i64>().is_ok_and(|n| n < latest),
        None => name.is_empty(),
    }
}

/// Refuses to migrate while [`pg_older_users`] finds any.
pub(crate) async fn refuse_pg(pool: &PgPool, latest: i64) -> Result<(), StoreError> {
    let older = pg_older_users(pool, latest).await?;
    if older.is_empty() {
        return Ok(());
    }
    Err(StoreError::Conflict(format!(
        "the database needs migrating, and {} other connection(s) to it may be an older \
         actiongate (named {:?}): stop every daemon of an older version first, since it would \
         ignore what the new schema adds; when none is, `actiongate migrate \
         --beside-other-clients` migrates anyway (docs/operations.md)",
        older.len(),
        older
    )))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_of_older_daemons_and_unnamed_clients_count() {
        assert!(older("", 20));
        assert!(older("actiongate m19", 20));
        assert!(!older("actiongate m20", 20));
        assert!(!older("actiongate m21", 20));
        assert!(!older("psql", 20));
        assert!(!older("actiongate mx", 20));
    }

    #[test]
    fn a_lock_of_another_process_on_the_file_is_found() {
        let locks = "1: POSIX  ADVISORY  READ 13703 fe:00:6201502 1073741826 1073742335\n\
                     2: FLOCK  ADVISORY  WRITE 13703 fe:00:6201500 0 EOF\n\
                     3: POSIX  ADVISORY  READ 2158 fe:00:5973984 128 128\n\
                     4: OFDLCK ADVISORY  READ -1 fe:00:6201502 0 0\n";
        let dev = 0xfe00;
        assert_eq!(lock_holder(locks, dev, 6201502, 1), Some(13703));
        assert_eq!(lock_holder(locks, dev, 6201502, 13703), None);
        assert_eq!(
            lock_holder(locks, dev, 6201500, 1),
            None,
            "a flock is not SQLite's"
        );
        assert_eq!(
            lock_holder(locks, 0x801, 5973984, 1),
            None,
            "another device"
        );
        assert_eq!(lock_holder(locks, dev, 5973984, 1), Some(2158));
    }

    #[test]
    fn this_process_is_not_another() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        assert_eq!(sqlite_user(&path).unwrap(), None);
        let own = rusqlite::Connection::open(&path).unwrap();
        own.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x)")
            .unwrap();
        assert_eq!(sqlite_user(&path).unwrap(), None);
    }
}
