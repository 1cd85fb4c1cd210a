//! Where the gate keeps its state, opened for the daemon and for the
//! commands that work on a data dir or database without a daemon
//! (`keys`, `audit export`, `migrate`): SQLite in the data dir, or a
//! Postgres database shared by several daemons. Adapters name the store
//! only through this module.

use std::path::{Path, PathBuf};

pub use actiongate_store::anchor::AuditKey;
pub use actiongate_store::{Durability, PgOptions, Store, StoreOptions, cpus};

use crate::GateError;

/// Which database.
#[derive(Debug, Clone)]
pub enum Target {
    /// The SQLite file at this path.
    Sqlite(PathBuf),
    /// A Postgres database (several daemons may share it).
    Postgres(PgOptions),
}

/// Opens the store at `target`, applying pending migrations.
pub async fn open(target: &Target, opts: StoreOptions) -> Result<Store, GateError> {
    Ok(match target {
        Target::Sqlite(path) => Store::open(path, opts).await?,
        Target::Postgres(pg) => Store::open_postgres(pg, opts).await?,
    })
}

/// Applies pending migrations to `target`: the migration it was at (0:
/// none) and the one it is at now.
/// They are refused while other programs might be daemons of an older
/// version, unless `beside_others` (Postgres; on SQLite, while another
/// process has the file open, always).
pub async fn migrate(target: &Target, beside_others: bool) -> Result<(i64, i64), GateError> {
    Ok(match target {
        Target::Sqlite(path) => actiongate_store::migrate(path).await?,
        Target::Postgres(pg) => actiongate_store::migrate_postgres(&pg.url, beside_others).await?,
    })
}

/// Copies the SQLite database at `path` to `to`, a new file, while a
/// daemon may be writing to it (one consistent snapshot); the copy's size.
/// Else why not, in words for the command line.
pub async fn backup_sqlite(path: &Path, to: &Path) -> Result<u64, String> {
    use actiongate_store::StoreError;
    actiongate_store::backup_sqlite(path, to)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => format!("no database at {}", path.display()),
            StoreError::Conflict(why) => why,
            StoreError::Full => format!("the disk under {} is full", to.display()),
            StoreError::Busy => "the database stayed locked; try again".to_owned(),
            e => e.to_string(),
        })
}
