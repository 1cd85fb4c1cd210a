//! Whether a program of an older version still uses the database when this
//! one is about to migrate it. A daemon of a version before sessions and
//! counted grants, serving beside a migrated schema, would go on allowing
//! every use of a counted grant and ignore a grant's session (upgrade
//! review). So pending migrations are applied only once such programs
//! are gone.
//!
//! SQLite: another process with the database open in WAL mode holds a
//! shared POSIX lock on a byte of its `-shm` file once it has read it, and
//! one on the database file's lock bytes while it reads or writes;
//! `F_GETLK` finds either, also from another PID namespace (a container
//! sharing the volume). A process that opened it and read nothing yet
//! holds none and is not seen. It is asked before this process opens a
//! connection of its own: closing the file descriptor it asks through
//! drops every POSIX lock this process holds on the file.
//! Postgres: daemons name their connections `actiongate m<N> …`, `N` the
//! last migration they know. Any other connection to the same database, a
//! daemon named so with a lower `N` or a client with any other name or
//! none (daemons before the names, or given a name of their own), might
//! be an older daemon, and holds migrations back until told otherwise.

use std::path::Path;

use sqlx::PgPool;

use crate::StoreError;

/// The start of the application name of a daemon's Postgres connections.
pub const APP_NAME: &str = "actiongate m";

/// Where SQLite's lock bytes start in a database file (`PENDING_BYTE`),
/// and how many there are: the pending, reserved and shared locks.
const LOCK_BYTES: (i64, i64) = (0x4000_0000, 512);

/// The byte of the `-shm` file every connection in WAL mode holds a shared
/// lock on while it has the database open, idle or not (SQLite's unix VFS,
/// `UNIX_SHM_DMS`).
const SHM_DMS: (i64, i64) = (128, 1);

/// Another process holding a lock on the SQLite database at `path` or its
/// `-shm` file (one that has it open): `Some(pid)`, 0 when it is in
/// another PID namespace. Call it before this process opens the database
/// (see the module).
pub(crate) fn sqlite_user(path: &Path) -> Result<Option<i32>, StoreError> {
    let mut shm = path.as_os_str().to_owned();
    shm.push("-shm");
    Ok(match lock_on(path, LOCK_BYTES)? {
        Some(pid) => Some(pid),
        None => lock_on(Path::new(&shm), SHM_DMS)?,
    })
}

/// The process holding a lock that conflicts with a write lock on `bytes`
/// (start, length) of the file at `path`, if any (none when it is missing).
fn lock_on(path: &Path, bytes: (i64, i64)) -> Result<Option<i32>, StoreError> {
    use std::os::fd::AsFd;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::Backend(sqlx::Error::Io(e))),
    };
    let mut probe = nix::libc::flock {
        l_type: nix::libc::F_WRLCK as i16,
        l_whence: nix::libc::SEEK_SET as i16,
        l_start: bytes.0,
        l_len: bytes.1,
        l_pid: 0,
    };
    nix::fcntl::fcntl(file.as_fd(), nix::fcntl::FcntlArg::F_GETLK(&mut probe))
        .map_err(|e| StoreError::Backend(sqlx::Error::Io(e.into())))?;
    Ok((probe.l_type != nix::libc::F_UNLCK as i16).then_some(probe.l_pid))
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

/// Whether a database at migration `applied` is to be migrated to
/// `latest` (then no older daemon may use it); refused for an existing one
/// unless `upgrade` (a command that only works on it, `keys` or `audit
/// export`, migrates a new database only).
pub(crate) fn needs_migrating(
    applied: i64,
    latest: i64,
    upgrade: bool,
) -> Result<bool, StoreError> {
    if applied >= latest {
        return Ok(false);
    }
    if !upgrade && applied > 0 {
        return Err(StoreError::Conflict(format!(
            "the database is at migration {applied} and this version needs {latest}: back it \
             up, then upgrade it with `actiongate migrate` or by starting the daemon \
             (docs/operations.md)"
        )));
    }
    Ok(true)
}

/// Logs that migrations `from`..=`to` were applied, when there were any.
pub(crate) fn log_migrated(from: i64, to: i64) {
    if from < to {
        tracing::info!(from, to, "database migrated");
    }
}

/// Refuses to migrate a SQLite database while `holder` (found by
/// [`sqlite_user`]) has it open.
pub(crate) fn refuse_sqlite(holder: Option<i32>) -> Result<(), StoreError> {
    let who = match holder {
        None => return Ok(()),
        Some(0) => "another process (in another PID namespace: a container?)".to_owned(),
        Some(pid) => format!("another process (pid {pid})"),
    };
    Err(StoreError::Conflict(format!(
        "the database needs migrating, and {who} has it open: if it is an older actiongate, \
         stop it first, since it would ignore what the new schema adds (docs/operations.md)"
    )))
}

/// The names of the other connections to the Postgres database of `pool`
/// that are not daemons knowing migration `latest` (`""` for one that
/// gives no name). Sessions of other roles show no `backend_type`; those
/// with a user are counted too.
pub(crate) async fn pg_older_users(pool: &PgPool, latest: i64) -> Result<Vec<String>, StoreError> {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT COALESCE(application_name, '') FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid() \
         AND (backend_type = 'client backend' OR (backend_type IS NULL AND usesysid IS NOT NULL))",
    )
    .fetch_all(pool)
    .await?;
    Ok(names
        .into_iter()
        .filter(|name| older(name, latest))
        .collect())
}

/// The name a daemon knowing migration `latest` gives its connections,
/// keeping the one the URL or `PGAPPNAME` gave after it (within
/// Postgres's 63 bytes).
pub(crate) fn app_name(latest: i64, given: Option<&str>) -> String {
    let mut name = format!("{APP_NAME}{latest}");
    if let Some(given) = given.filter(|g| !g.is_empty()) {
        name.push(' ');
        for c in given.chars() {
            if name.len() + c.len_utf8() > 63 {
                break;
            }
            name.push(c);
        }
    }
    name
}

/// Whether a connection named `name` may be a daemon older than `latest`:
/// any but one named by a daemon knowing `latest` or later.
fn older(name: &str, latest: i64) -> bool {
    let known = name
        .strip_prefix(APP_NAME)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<i64>().ok());
    known.is_none_or(|n| n < latest)
}

/// Refuses to migrate while [`pg_older_users`] finds any.
pub(crate) async fn refuse_pg(pool: &PgPool, latest: i64) -> Result<(), StoreError> {
    let older = pg_older_users(pool, latest).await?;
    if older.is_empty() {
        return Ok(());
    }
    Err(StoreError::Conflict(format!(
        "the database needs migrating, and {} other connection(s) to it are not daemons of this \
         version (named {:?}): stop every older actiongate first, since it would ignore what the \
         new schema adds; when none of these is one, `actiongate migrate \
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
    fn only_daemons_of_this_version_or_later_are_not_counted() {
        assert!(older("", 20));
        assert!(older("actiongate m19", 20));
        assert!(older("actiongate m19 prod", 20));
        assert!(!older("actiongate m20", 20));
        assert!(!older("actiongate m21 prod", 20));
        assert!(older("psql", 20));
        assert!(older("actiongate", 20));
        assert!(older("actiongate mx", 20));
    }

    #[test]
    fn a_given_name_is_kept_after_the_daemons_own_within_63_bytes() {
        assert_eq!(app_name(20, None), "actiongate m20");
        assert_eq!(app_name(20, Some("")), "actiongate m20");
        assert_eq!(app_name(20, Some("prod")), "actiongate m20 prod");
        let long = app_name(20, Some(&"é".repeat(40)));
        assert!(
            long.len() <= 63 && long.starts_with("actiongate m20 é"),
            "{long}"
        );
        assert!(!older(&long, 20));
    }

    #[test]
    fn a_database_nobody_has_open_has_no_user() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        assert_eq!(sqlite_user(&path).unwrap(), None);
        let own = rusqlite::Connection::open(&path).unwrap();
        own.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x)")
            .unwrap();
        drop(own);
        assert_eq!(sqlite_user(&path).unwrap(), None);
    }
}
