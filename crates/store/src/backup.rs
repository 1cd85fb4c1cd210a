//! A consistent copy of a SQLite database taken while a daemon writes to it.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};

use crate::StoreError;

/// Writes a copy of the database at `path` to `to`, a file that must not
/// exist, readable by its owner alone. It is one snapshot (SQLite's
/// `VACUUM INTO` reads it in one read transaction), so a daemon may go on
/// writing meanwhile; it is compacted, and a complete database a daemon
/// opens as its own. On failure nothing is left at `to`.
pub async fn backup_sqlite(path: &Path, to: &Path) -> Result<u64, StoreError> {
    if !path.is_file() {
        return Err(StoreError::NotFound);
    }
    let mut file = std::fs::OpenOptions::new();
    file.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        file.mode(0o600);
    }
    match file.open(to) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(StoreError::Conflict(format!("{} exists", to.display())));
        }
        Err(e) => return Err(StoreError::Backend(sqlx::Error::Io(e))),
    }
    let copied = vacuum_into(path, to).await;
    if copied.is_err() {
        let _ = std::fs::remove_file(to);
    }
    copied?;
    Ok(std::fs::metadata(to).map(|m| m.len()).unwrap_or(0))
}

/// `VACUUM INTO` `to` (empty) from the database at `path`, opened for
/// reading only.
async fn vacuum_into(path: &Path, to: &Path) -> Result<(), StoreError> {
    let mut conn = SqliteConnectOptions::from_str("sqlite://")?
        .filename(path)
        .read_only(true)
        .busy_timeout(Duration::from_secs(10))
        .connect()
        .await?;
    let target = to
        .to_str()
        .ok_or_else(|| StoreError::Conflict(format!("{} is not UTF-8", to.display())))?;
    let done = sqlx::query("VACUUM INTO ?")
        .bind(target)
        .execute(&mut conn)
        .await;
    let _ = conn.close().await;
    done.map(|_| ()).map_err(StoreError::from)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_copy_holds_what_was_committed_and_a_second_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.db");
        crate::migrate(&db).await.unwrap();
        let mut conn = SqliteConnectOptions::from_str("sqlite://")
            .unwrap()
            .filename(&db)
            .connect()
            .await
            .unwrap();
        sqlx::query("CREATE TABLE t (x TEXT)")
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query("INSERT INTO t VALUES ('kept')")
            .execute(&mut conn)
            .await
            .unwrap();
        let to = dir.path().join("b.db");
        assert!(backup_sqlite(&db, &to).await.unwrap() > 0);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&to).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let mut copy = SqliteConnectOptions::from_str("sqlite://")
            .unwrap()
            .filename(&to)
            .connect()
            .await
            .unwrap();
        let x: String = sqlx::query_scalar("SELECT x FROM t")
            .fetch_one(&mut copy)
            .await
            .unwrap();
        assert_eq!(x, "kept");
        let before = std::fs::read(&to).unwrap();
        assert!(matches!(
            backup_sqlite(&db, &to).await,
            Err(StoreError::Conflict(_))
        ));
        assert_eq!(
            std::fs::read(&to).unwrap(),
            before,
            "an existing file is left"
        );
        let missing = dir.path().join("none.db");
        assert!(matches!(
            backup_sqlite(&missing, &dir.path().join("c.db")).await,
            Err(StoreError::NotFound)
        ));
        assert!(!dir.path().join("c.db").exists());
    }
}
